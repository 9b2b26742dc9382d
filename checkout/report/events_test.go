package report

import (
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
)

func testEvents(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	m := time.Minute
	tl, err := KeyTimeline(ctx, f.db, f.shop, "k-a1")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range tl {
		kinds = append(kinds, e.Kind)
	}
	want := []string{checkout.KindReplayed, checkout.KindCreated, checkout.KindCompleted, checkout.KindReplayed, checkout.KindReplayed, checkout.KindReusedConflict, checkout.KindReplayed}
	if !slices.Equal(kinds, want) {
		t.Fatalf("timeline kinds = %v, want %v", kinds, want)
	}
	c := tl[5]
	if !c.At.Equal(at0.Add(3*m)) || c.ClientID != f.shop || c.Key != "k-a1" || c.KeyID == nil || *c.KeyID != f.keys["k-a1"] ||
		c.Status == nil || *c.Status != 422 || c.RequestID != "req-k-a1-reused_conflict" || c.RemoteAddr != "203.0.113.7" ||
		c.UserAgent != "tekrar-test/1" || c.Fingerprint != hex.EncodeToString(sha("other body")) ||
		string(c.Detail) != `{"path": "/v1/orders", "method": "POST"}` {
		t.Errorf("conflict event = %+v (detail %s)", c, c.Detail)
	}
	if tl[0].KeyID == nil || *tl[0].KeyID != 987654 || tl[2].Detail != nil || tl[2].Fingerprint != "" {
		t.Errorf("timeline = %+v", tl)
	}
	if tl, err := KeyTimeline(ctx, f.db, f.pos, "k-a1"); err != nil || len(tl) != 0 {
		t.Errorf("timeline of another client's key: %v, %v", tl, err)
	}

	// ListHistory against a plain query, in pages.
	type q struct {
		f     HistoryFilter
		where string
		args  []any
	}
	h := time.Hour
	for _, tt := range []q{
		{HistoryFilter{}, "true", nil},
		{HistoryFilter{Kinds: []string{checkout.KindReplayed, checkout.KindReusedConflict}}, "kind IN ('replayed', 'reused_conflict')", nil},
		{HistoryFilter{Kinds: []string{checkout.KindReplayed}, ClientID: f.shop, From: at0, To: at0.Add(6*h + 2*m)},
			"kind = 'replayed' AND client_id = $1 AND at >= $2 AND at < $3", []any{f.shop, at0, at0.Add(6*h + 2*m)}},
		{HistoryFilter{ClientID: f.pos}, "client_id = $1", []any{f.pos}},
		{HistoryFilter{ClientID: f.shop, Key: "k-a1", Kinds: []string{checkout.KindReplayed, checkout.KindCreated}, From: at0},
			"client_id = $1 AND key = 'k-a1' AND kind IN ('replayed', 'created') AND at >= $2", []any{f.shop, at0}},
		{HistoryFilter{Kinds: []string{checkout.KindLateRetry, checkout.KindExpired}, To: at0}, "kind IN ('late_retry', 'expired') AND at < $1", []any{at0}},
		// By key without the client, by order and by customer: the events of the keys
		// ListKeys finds, live or swept.
		{HistoryFilter{Key: "dup"}, "key = 'dup'", nil},
		{HistoryFilter{Key: "dup", Kinds: []string{checkout.KindReplayed}}, "key = 'dup' AND kind = 'replayed'", nil},
		{HistoryFilter{OrderID: f.orders["a1"]}, "client_id = $1 AND key IN ('k-a1', 'k-r1', 'k-r2')", []any{f.shop}},
		{HistoryFilter{OrderID: f.orders["a1"], Kinds: []string{checkout.KindReplayed}, From: at0},
			"client_id = $1 AND key = 'k-a1' AND kind = 'replayed' AND at >= $2", []any{f.shop, at0}},
		{HistoryFilter{CustomerID: "cus_A"}, "client_id = $1 AND key IN ('k-a1', 'k-a2', 'k-r1', 'k-r2')", []any{f.shop}},
		{HistoryFilter{CustomerID: "cus_D"}, "client_id = $1 AND key = 'k-swept'", []any{f.shop}},
		{HistoryFilter{ClientID: f.shop, CustomerID: "cus_B", Kinds: []string{checkout.KindInUseRejected, checkout.KindCreated}},
			"client_id = $1 AND key IN ('k-b1', 'k-b2') AND kind IN ('in_use_rejected', 'created')", []any{f.shop}},
		{HistoryFilter{CustomerID: "cus_A", Key: "k-a2", To: at0.Add(2*h + m)},
			"client_id = $1 AND key = 'k-a2' AND at < $2", []any{f.shop, at0.Add(2*h + m)}},
	} {
		var want []int64
		if err := f.db.Select(&want, `SELECT id FROM key_events WHERE `+tt.where+` ORDER BY at DESC, id DESC`, tt.args...); err != nil {
			t.Fatal(err)
		}
		if len(want) < 2 {
			t.Fatalf("%+v: too few events (%d) to page through", tt.f, len(want))
		}
		for _, limit := range []int{1, 3, 200} {
			got := rowIDs(collectPages(t, limit, func(p Page) ([]HistoryRow, Page, error) { return ListHistory(ctx, f.db, tt.f, p) }),
				func(e HistoryRow) int64 { return e.ID })
			if !slices.Equal(got, want) {
				t.Errorf("ListHistory(%+v) in pages of %d = %v, want %v", tt.f, limit, got, want)
			}
		}
	}
	for _, none := range []HistoryFilter{
		{Key: "nope"},
		{ClientID: f.pos, CustomerID: "cus_A"},
		{OrderID: f.orders["a1"], CustomerID: "cus_B"},
		{OrderID: f.orders["a1"], Key: "k-a2"},
		{CustomerID: "cus_A", Kinds: []string{checkout.KindLateRetry}},
	} {
		if rows, nx, err := ListHistory(ctx, f.db, none, Page{}); err != nil || len(rows) != 0 || nx.After != "" {
			t.Errorf("ListHistory(%+v) = %d rows, %+v, %v; want none", none, len(rows), nx, err)
		}
	}
	for _, bad := range []HistoryFilter{{Kinds: []string{"replay"}}, {OrderID: 1, Kinds: []string{"conflict"}}} {
		if _, _, err := ListHistory(ctx, f.db, bad, Page{}); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("ListHistory(%+v): err %v, want ErrInvalidQuery", bad, err)
		}
	}

	// What the key stores comes with each event: the conflict of k-a1 shows both
	// fingerprints and the order; the late retry of the swept k-swept reads its tombstone; a
	// refund key names the order it refunds; an event whose key row is gone, with no
	// tombstone, knows nothing more.
	f.event(f.shop, "k-r1", checkout.KindReplayed, at0.Add(-1000*h), 201) // outside every other test's window
	defer f.exec(`DELETE FROM key_events WHERE key = 'k-r1'`)
	one := func(ef HistoryFilter) HistoryRow {
		t.Helper()
		rows, _, err := ListHistory(ctx, f.db, ef, Page{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("ListHistory(%+v) = %+v, %v; want one row", ef, rows, err)
		}
		return rows[0]
	}
	is := func(p *int64, want int64) bool { return p != nil && *p == want }
	c = one(HistoryFilter{ClientID: f.shop, Key: "k-a1", Kinds: []string{checkout.KindReusedConflict}})
	if c.ClientName != "shop app" || c.KeyFingerprint != hex.EncodeToString(sha("k-a1")) ||
		c.Fingerprint != hex.EncodeToString(sha("other body")) || c.KeyMethod != "POST" || c.KeyPath != "/v1/orders" ||
		!is(c.OrderID, f.orders["a1"]) {
		t.Errorf("conflict of k-a1 = %+v", c)
	}
	late := one(HistoryFilter{Kinds: []string{checkout.KindLateRetry}})
	if late.Key != "k-swept" || late.KeyID != nil || late.KeyFingerprint != hex.EncodeToString(sha("k-swept")) ||
		late.KeyPath != "/v1/orders" || !is(late.OrderID, f.orders["d1"]) {
		t.Errorf("late retry of k-swept = %+v", late)
	}
	if r := one(HistoryFilter{Key: "k-r1"}); !is(r.OrderID, f.orders["a1"]) || r.KeyPath != "/v1/orders/1/refunds" {
		t.Errorf("event of refund key k-r1 = %+v", r)
	}
	if old := one(HistoryFilter{ClientID: f.shop, Key: "k-a1", To: at0}); old.KeyFingerprint != "" || old.OrderID != nil || old.ClientName != "shop app" {
		t.Errorf("event of a gone key row = %+v", old)
	}
	if d := one(HistoryFilter{ClientID: f.pos, Key: "dup", Kinds: []string{checkout.KindCreated}}); d.ClientName != "pos fleet" || !is(d.OrderID, f.orders["dup-pos"]) {
		t.Errorf("created of pos fleet/dup = %+v", d)
	}
}
