package checkout

import (
	"bytes"
	"testing"
	"time"
)

// TestProviderKeysDeriveFromTheIntent: a key row's provider keys, and its order's
// installment keys, are the same for the same intent whatever the row (its id, its creation
// time: a lost row claimed again), and differ when anything of the intent or the step does.
// A row claimed before there were intents keeps the keys it always had.
func TestProviderKeysDeriveFromTheIntent(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	fp, scope, otherScope := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	claimed := func(id, client int64, key string, scope []byte, created time.Time) *Key {
		k := &Key{ID: id, ClientID: client, Key: key, Fingerprint: fp, ScopeFingerprint: scope, CreatedAt: created}
		k.Intent = claimOf(k, "charge").Intent
		return k
	}
	first := claimed(7, 1, "k-1", scope, t0)
	cases := []struct {
		name string
		k    *Key
		step string
		same bool
	}{
		{"the same row", first, "charge", true},
		{"the row lost and claimed again", claimed(912, 1, "k-1", scope, t0.Add(time.Hour)), "charge", true},
		{"another exact body of the same scope (a new card token)", func() *Key {
			k := &Key{ID: 8, ClientID: 1, Key: "k-1", Fingerprint: bytes.Repeat([]byte{9}, 32), ScopeFingerprint: scope, CreatedAt: t0}
			k.Intent = claimOf(k, "charge").Intent
			return k
		}(), "charge", true},
		{"another client", claimed(7, 2, "k-1", scope, t0), "charge", false},
		{"another key", claimed(7, 1, "k-2", scope, t0), "charge", false},
		{"another scope", claimed(7, 1, "k-1", otherScope, t0), "charge", false},
		{"no scope: the exact fingerprint", claimed(7, 1, "k-1", nil, t0), "charge", false},
		{"another step", first, "refund", false},
	}
	want := providerKey("charge", first)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := providerKey(tc.step, tc.k); (got == want) != tc.same {
				t.Errorf("providerKey(%q) = %s, first %s; want same %v", tc.step, got, want, tc.same)
			}
		})
	}
	if a, b := providerKey("refund", first), providerKey("refund", claimed(912, 1, "k-1", scope, t0.Add(time.Hour))); a != b {
		t.Errorf("refund keys of one intent differ: %s, %s", a, b)
	}

	// A row claimed before: its id and created_at, as they always were (the values the
	// derivation gave before there were intents).
	old := &Key{ID: 7, ClientID: 1, Key: "k-1", Fingerprint: fp, ScopeFingerprint: scope, CreatedAt: t0}
	if got := providerKey("charge", old); got != "tekrar_ch_8d6efea5fc371c4fd22428adbd3a8288" {
		t.Errorf("the old derivation changed: %s", got)
	}
	if got := InstallmentKey(41, t0, nil, 2, 1); got != "tekrar_in_646ca97d925e5a8865da10ca641280f3" {
		t.Errorf("the old installment derivation changed: %s", got)
	}

	// Installments: the order's intent, n and the attempt; nothing of the order's row.
	in := InstallmentKey(41, t0, first.Intent, 2, 1)
	for _, tc := range []struct {
		name string
		key  string
		same bool
	}{
		{"the order lost and claimed again", InstallmentKey(977, t0.Add(time.Hour), first.Intent, 2, 1), true},
		{"another installment", InstallmentKey(41, t0, first.Intent, 3, 1), false},
		{"another attempt", InstallmentKey(41, t0, first.Intent, 2, 2), false},
		{"another intent", InstallmentKey(41, t0, claimed(7, 1, "k-2", scope, t0).Intent, 2, 1), false},
		{"an order claimed before: its id", InstallmentKey(41, t0, nil, 2, 1), false},
	} {
		if (tc.key == in) != tc.same {
			t.Errorf("installment key, %s: %s, first %s; want same %v", tc.name, tc.key, in, tc.same)
		}
	}
}
