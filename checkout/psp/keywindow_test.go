package psp

import (
	"sync"
	"testing"
	"time"
)

// TestKeyWindowForgetsKeys: with a KeyWindow of a minute the sandbox answers a repeat inside
// the window with the first charge, and makes a new charge of a repeat past it, which a
// look-up by the key finds from then on; without a window a key is remembered for ever. In
// process and over HTTP, whose client learns the window from GET /capability.
func TestKeyWindowForgetsKeys(t *testing.T) {
	for _, tc := range []struct {
		name        string
		window      time.Duration
		wantCharges int
	}{
		{"for ever", 0, 1},
		{"a minute", time.Minute, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
			forEachProvider(t, SandboxOptions{KeyWindow: tc.window, Now: clock}, func(t *testing.T, p Provider, sb *Sandbox) {
				want, _ := CapabilityOf(ProviderSandbox)
				if tc.window > 0 {
					want.KeyWindow = tc.window
				}
				if got := PromisesOf(p); got.KeyWindow != want.KeyWindow || got.Provider != ProviderSandbox {
					t.Errorf("PromisesOf = %q, window %v; want %q, %v", got.Provider, got.KeyWindow, want.Provider, want.KeyWindow)
				}
				req := visaCharge("order-1", 700)
				first := mustCharge(t, p, req)
				advance(50 * time.Second)
				if again := mustCharge(t, p, req); again.ID != first.ID {
					t.Errorf("a repeat inside the window made charge %s, want the first %s", again.ID, first.ID)
				}
				advance(24 * time.Hour)
				late := mustCharge(t, p, req)
				if got := ledgerCharges(t, sb, req.Key); len(got) != tc.wantCharges {
					t.Fatalf("the ledger holds %d charges under the key, want %d", len(got), tc.wantCharges)
				}
				found, err := p.LookupCharge(testContext(t), req.Key)
				if err != nil || found.ID != late.ID {
					t.Errorf("LookupCharge = %s, %v; want the latest charge %s", found.ID, err, late.ID)
				}
				if tc.window == 0 && late.ID != first.ID {
					t.Errorf("without a window a repeat a day later made charge %s, want the first %s", late.ID, first.ID)
				}
			})
		})
	}
}
