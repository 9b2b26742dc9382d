package report

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
)

// keyNames names the keys of rows: the shop app's by their key, other clients' as
// "client/key".
func keyNames(rows []KeyRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
		if r.ClientName != "shop app" {
			out[i] = r.ClientName + "/" + r.Key
		}
	}
	return out
}

// oracleKeys lists keys by a plain query: what ListKeys must return, in order.
func oracleKeys(t *testing.T, d *sqlx.DB, where string, args ...any) []int64 {
	t.Helper()
	var rowIDs []int64
	if err := d.Select(&rowIDs, `SELECT id FROM idempotency_keys k WHERE `+where+` ORDER BY created_at DESC, id DESC`, args...); err != nil {
		t.Fatal(err)
	}
	return rowIDs
}

func keyRowID(r KeyRow) int64 { return r.ID }

func testListKeys(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	list := func(kf KeyFilter) []KeyRow {
		t.Helper()
		rows, nx, err := ListKeys(ctx, f.db, kf, Page{Limit: MaxPageLimit})
		if err != nil {
			t.Fatal(err)
		}
		if nx.After != "" {
			t.Fatalf("ListKeys(%+v): unexpected next page", kf)
		}
		return rows
	}
	h := time.Hour
	tests := []struct {
		name string
		f    KeyFilter
		want []string
	}{
		{"key at every client", KeyFilter{Key: "dup"}, []string{"pos fleet/dup", "dup"}},
		{"key of one client", KeyFilter{ClientID: f.pos, Key: "dup"}, []string{"pos fleet/dup"}},
		{"key of another client", KeyFilter{ClientID: f.idle, Key: "dup"}, []string{}},
		{"customer: orders and the refund key", KeyFilter{CustomerID: "cus_A"}, []string{"k-a2", "k-r1", "k-a1"}},
		{"customer and client", KeyFilter{ClientID: f.shop, CustomerID: "cus_B"}, []string{"k-b2", "k-b1"}},
		{"customer of another client", KeyFilter{ClientID: f.pos, CustomerID: "cus_B"}, []string{}},
		{"order: its key and its refund keys", KeyFilter{OrderID: f.orders["a1"]}, []string{"k-r1", "k-a1"}},
		{"order and customer", KeyFilter{OrderID: f.orders["a1"], CustomerID: "cus_B"}, []string{}},
		{"state", KeyFilter{State: checkout.StateNeedsAttention}, []string{"k-c1"}},
		{"state in progress", KeyFilter{State: checkout.StateInProgress}, []string{"k-b2"}},
		{"state and client", KeyFilter{ClientID: f.pos, State: checkout.StateInProgress}, []string{}},
		{"time range", KeyFilter{ClientID: f.shop, From: at0.Add(h), To: at0.Add(4 * h)}, []string{"k-b1", "k-a2", "k-r1"}},
		{"time range all clients", KeyFilter{From: at0.Add(3 * h), To: at0.Add(6*h + 1)},
			[]string{"k-tie-900005", "k-tie-900004", "k-tie-900003", "k-tie-900002", "k-tie-900001",
				"pos fleet/dup", "k-tie", "dup", "k-c1", "k-b2", "k-b1"}},
		{"everything combined", KeyFilter{ClientID: f.shop, CustomerID: "cus_A", State: checkout.StateCompleted,
			From: at0, To: at0.Add(2 * h)}, []string{"k-r1", "k-a1"}},
	}
	for _, tt := range tests {
		got := keyNames(list(tt.f))
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: ListKeys = %v, want %v", tt.name, got, tt.want)
		}
	}

	// Swept keys page by (expired_at, client, key): every one once, in order, at any page size.
	for _, limit := range []int{1, 2, 3} {
		got := keyNames(collectPages(t, limit, func(p Page) ([]KeyRow, Page, error) {
			return ListKeys(ctx, f.db, KeyFilter{State: checkout.KeyStateExpired}, p)
		}))
		if want := []string{"same-key", "k-r2", "k-settle", "k-swept"}; !slices.Equal(got, want) {
			t.Errorf("expired keys by pages of %d: %v, want %v", limit, got, want)
		}
	}
	if rows := list(KeyFilter{State: checkout.KeyStateExpired, Key: "k-swept"}); len(rows) != 1 || rows[0].State != checkout.KeyStateExpired ||
		!rows[0].CreatedAt.Equal(at0.Add(-48*h)) || !rows[0].ExpiresAt.Equal(at0.Add(-24*h)) || rows[0].OrderID == nil {
		t.Errorf("k-swept = %+v", rows)
	}

	// The row itself.
	rows := list(KeyFilter{Key: "k-a1"})
	if len(rows) != 1 {
		t.Fatalf("k-a1: %d rows", len(rows))
	}
	r := rows[0]
	if r.ID != f.keys["k-a1"] || r.ClientID != f.shop || r.ClientName != "shop app" || r.State != checkout.StateCompleted ||
		r.RecoveryPoint != checkout.PointFinished || r.Method != "POST" || r.Path != "/v1/orders" ||
		r.OrderID == nil || *r.OrderID != f.orders["a1"] || r.RefundID != nil || r.ResponseStatus == nil ||
		*r.ResponseStatus != 201 || !r.CreatedAt.Equal(at0) || !r.ExpiresAt.Equal(at0.Add(24*h)) || r.Replays != 3 {
		t.Errorf("k-a1 row = %+v", r)
	}
	rows = list(KeyFilter{Key: "k-r1", ClientID: f.shop})
	if len(rows) != 1 || rows[0].RefundID == nil || rows[0].RefundOrderID == nil || *rows[0].RefundOrderID != f.orders["a1"] ||
		rows[0].OrderID != nil || rows[0].Replays != 0 {
		t.Errorf("k-r1 rows = %+v", rows)
	}
	for _, r := range list(KeyFilter{Key: "dup"}) {
		if want := map[int64]int64{f.shop: 1, f.pos: 2}[r.ClientID]; r.Replays != want {
			t.Errorf("dup of %s: %d replays, want %d", r.ClientName, r.Replays, want)
		}
	}

	// Every row exactly once across pages, in the order of a plain query, whatever the
	// path: all clients (the per-client merge), one client, a state, a time range.
	pages := []struct {
		f     KeyFilter
		where string
		args  []any
	}{
		{KeyFilter{}, "true", nil},
		{KeyFilter{ClientID: f.shop}, "client_id = $1", []any{f.shop}},
		{KeyFilter{ClientID: f.pos, From: at0.Add(24*h + 10*time.Second), To: at0.Add(24*h + 100*time.Second)},
			"client_id = $1 AND created_at >= $2 AND created_at < $3",
			[]any{f.pos, at0.Add(24*h + 10*time.Second), at0.Add(24*h + 100*time.Second)}},
		{KeyFilter{State: checkout.StateCompleted}, "state = 'completed'", nil},
	}
	for _, p := range pages {
		want := oracleKeys(t, f.db, p.where, p.args...)
		if len(want) < 10 {
			t.Fatalf("%+v: too few keys to page through", p.f)
		}
		for _, limit := range pageSizes(len(want)) {
			got := rowIDs(collectPages(t, limit, func(pg Page) ([]KeyRow, Page, error) { return ListKeys(ctx, f.db, p.f, pg) }), keyRowID)
			if !slices.Equal(got, want) {
				t.Errorf("ListKeys(%+v) in pages of %d:\n got %v\nwant %v", p.f, limit, got, want)
			}
		}
	}

	// The cap: at most MaxPageLimit rows, whatever is asked; the default otherwise.
	for _, limit := range []int{0, 201, 100000} {
		rows, nx, err := ListKeys(ctx, f.db, KeyFilter{ClientID: f.pos}, Page{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		want := MaxPageLimit
		if limit == 0 {
			want = DefaultPageLimit
		}
		if len(rows) != want || nx.After == "" || nx.Limit != want {
			t.Errorf("limit %d: %d rows, next %+v; want %d rows and a next page", limit, len(rows), nx, want)
		}
	}

	// Bad input.
	for _, bad := range []struct {
		f KeyFilter
		p Page
	}{
		{KeyFilter{State: "done"}, Page{}},
		{KeyFilter{}, Page{After: "nonsense"}},
		{KeyFilter{}, Page{After: "12_x"}},
	} {
		if _, _, err := ListKeys(ctx, f.db, bad.f, bad.p); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("ListKeys(%+v, %+v): err %v, want ErrInvalidQuery", bad.f, bad.p, err)
		}
	}
}

func testExpiringKeys(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h := time.Hour
	// The POS fleet's bulk keys expire an hour after they arrive, a second apart.
	from, to := at0.Add(25*h+5*time.Second), at0.Add(25*h+25*time.Second)
	var want []string
	for i := 5; i < 25; i++ {
		want = append(want, fmt.Sprintf("bulk-%03d", i))
	}
	for _, limit := range []int{3, 20, 200} {
		rows := collectPages(t, limit, func(p Page) ([]KeyRow, Page, error) { return ExpiringKeys(ctx, f.db, from, to, p) })
		got := make([]string, len(rows))
		for i, r := range rows {
			got[i] = r.Key
		}
		if !slices.Equal(got, want) {
			t.Errorf("ExpiringKeys in pages of %d = %v, want %v", limit, got, want)
		}
	}
	// Ties: the eight keys that arrived at at0+6h expire together, soonest first then by id.
	want = []string{"dup", "k-tie", "pos fleet/dup", "k-tie-900001", "k-tie-900002", "k-tie-900003", "k-tie-900004", "k-tie-900005"}
	for _, limit := range []int{1, 2, 3} {
		rows := collectPages(t, limit, func(p Page) ([]KeyRow, Page, error) {
			return ExpiringKeys(ctx, f.db, at0.Add(30*h), at0.Add(30*h+time.Second), p)
		})
		if got := keyNames(rows); !slices.Equal(got, want) {
			t.Errorf("ExpiringKeys at at0+30h in pages of %d = %v, want %v", limit, got, want)
		}
	}
	rows, _, err := ExpiringKeys(ctx, f.db, at0.Add(24*h), at0.Add(24*h+time.Minute), Page{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keyNames(rows); !slices.Equal(got, []string{"k-a1"}) {
		t.Errorf("ExpiringKeys at at0+24h = %v, want [k-a1]", got)
	}
	if _, _, err := ExpiringKeys(ctx, f.db, at0, at0, Page{}); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("empty range: err %v", err)
	}
}
