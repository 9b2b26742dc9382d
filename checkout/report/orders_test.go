package report

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func testFindOrders(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h := time.Hour
	find := func(of OrderFilter) []string {
		t.Helper()
		rows, nx, err := FindOrders(ctx, f.db, of, Page{Limit: MaxPageLimit})
		if err != nil {
			t.Fatal(err)
		}
		if nx.After != "" {
			t.Fatalf("FindOrders(%+v): unexpected next page", of)
		}
		names := make([]string, 0, len(rows))
		for _, r := range rows {
			for name, id := range f.orders {
				if id == r.ID {
					names = append(names, name)
				}
			}
		}
		return names
	}
	dt := at0.Add(48 * h)
	tests := []struct {
		name string
		f    OrderFilter
		want []string
	}{
		{"customer", OrderFilter{CustomerID: "cus_A"}, []string{"a2", "a1"}},
		{"customer of a client", OrderFilter{CustomerID: "cus_DT", ClientID: f.pos}, []string{"dt-pos"}},
		{"customer at every client", OrderFilter{CustomerID: "cus_DT"}, []string{"dt-pos", "dt2", "dt1"}},
		{"email, any case", OrderFilter{CustomerEmail: "ayse@example.COM"}, []string{"a1"}},
		{"email of two orders", OrderFilter{CustomerEmail: "ZED@example.com"}, []string{"em2", "em1"}},
		{"card last4", OrderFilter{CardLast4: "5555"}, []string{"a2"}},
		{"declined card", OrderFilter{CardLast4: "0002", ClientID: f.shop}, []string{"b1"}},
		{"amount", OrderFilter{Amount: 3000}, []string{"dup-pos", "dup-shop"}},
		{"amount and client", OrderFilter{Amount: 3000, ClientID: f.shop}, []string{"dup-shop"}},
		{"amount, card and window", OrderFilter{Amount: 4500, CardLast4: "4242", From: at0.Add(-h), To: dt.Add(30 * time.Second)},
			[]string{"dt1", "a1"}},
		{"window", OrderFilter{From: at0.Add(4 * h), To: at0.Add(6*h + 1)}, []string{"tie-900005", "tie-900004", "tie-900003", "tie-900002", "tie-900001",
			"dup-pos", "tie-shop", "dup-shop", "c1", "b2"}},
		{"window and client", OrderFilter{ClientID: f.shop, From: at0.Add(-48 * h), To: at0.Add(h)}, []string{"a1", "e1", "d1"}},
		{"nothing matches", OrderFilter{CustomerID: "cus_A", Amount: 4600}, []string{}},
	}
	for _, tt := range tests {
		if got := find(tt.f); !slices.Equal(got, tt.want) {
			t.Errorf("%s: FindOrders = %v, want %v", tt.name, got, tt.want)
		}
	}

	rows, _, err := FindOrders(ctx, f.db, OrderFilter{CustomerID: "cus_A", Amount: 4500}, Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("a1: %d rows", len(rows))
	}
	r := rows[0]
	if r.ClientName != "shop app" || r.RefundedAmount != 1000 || r.Currency != "TRY" || !slices.Equal(r.Keys, []string{"k-a1"}) ||
		r.Payment == nil || r.Payment.CardLast4 != "4242" || r.Payment.CardBrand != "visa" ||
		r.Payment.ChargeID != fmt.Sprint("ch_", r.ID) || !r.Payment.CreatedAt.Equal(at0.Add(time.Second)) || !r.CreatedAt.Equal(at0) {
		t.Errorf("a1 = %+v", r)
	}
	// Keys: a swept key's tombstone, and a key string that made two orders.
	rows, _, _ = FindOrders(ctx, f.db, OrderFilter{CustomerID: "cus_SK"}, Page{})
	if len(rows) != 2 || !slices.Equal(rows[0].Keys, []string{"same-key"}) || !slices.Equal(rows[1].Keys, []string{"same-key"}) {
		t.Errorf("cus_SK = %+v", rows)
	}

	// Pages: all orders (the per-client merge), one client's.
	for _, of := range []OrderFilter{{}, {ClientID: f.pos}, {Amount: 4500}} {
		var want []int64
		q := `SELECT id FROM orders WHERE ($1 = 0 OR client_id = $1) AND ($2 = 0 OR amount = $2) ORDER BY created_at DESC, id DESC`
		if err := f.db.Select(&want, q, of.ClientID, of.Amount); err != nil {
			t.Fatal(err)
		}
		for _, limit := range pageSizes(len(want)) {
			got := rowIDs(collectPages(t, limit, func(p Page) ([]OrderRow, Page, error) { return FindOrders(ctx, f.db, of, p) }),
				func(o OrderRow) int64 { return o.ID })
			if !slices.Equal(got, want) {
				t.Errorf("FindOrders(%+v) in pages of %d: %d rows, want %d\n got %v\nwant %v", of, limit, len(got), len(want), got, want)
			}
		}
	}
	if rows, nx, err := FindOrders(ctx, f.db, OrderFilter{}, Page{Limit: 500}); err != nil || len(rows) != MaxPageLimit || nx.After == "" {
		t.Errorf("limit cap: %d rows, next %+v, %v", len(rows), nx, err)
	}
}

func testDoubleTaps(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h := time.Hour
	dt := at0.Add(48 * h)
	name := func(id int64) string {
		for n, oid := range f.orders {
			if oid == id {
				return n
			}
		}
		return fmt.Sprint(id)
	}
	names := func(taps []DoubleTap) []string {
		var out []string
		for _, g := range taps {
			var ns []string
			for _, o := range g.Orders {
				ns = append(ns, name(o.ID))
			}
			out = append(out, strings.Join(ns, "+"))
		}
		return out
	}
	// Cases of their own, three hours after the others: two cards, three taps, a refunded
	// order, two currencies.
	g := dt.Add(3 * h)
	s := time.Second
	f.order(fixtureOrder{name: "cd1", client: f.shop, key: "tap-cd1", status: "paid", amount: 4500, cust: "cus_CD", at: g, brand: "visa", last4: "4242"})
	f.order(fixtureOrder{name: "cd2", client: f.shop, key: "tap-cd2", status: "paid", amount: 4500, cust: "cus_CD", at: g.Add(20 * s), brand: "mastercard", last4: "4444"})
	f.order(fixtureOrder{name: "cd3", client: f.shop, key: "tap-cd3", status: "paid", amount: 4500, cust: "cus_CD", at: g.Add(40 * s), brand: "mastercard", last4: "4242"})
	f.order(fixtureOrder{name: "tr1", client: f.shop, key: "tap-tr1", status: "paid", amount: 4500, cust: "cus_TR", at: g.Add(10 * time.Minute)})
	f.order(fixtureOrder{name: "tr2", client: f.shop, key: "tap-tr2", status: "paid", amount: 4500, cust: "cus_TR", at: g.Add(10*time.Minute + 20*s)})
	f.order(fixtureOrder{name: "tr3", client: f.shop, key: "tap-tr3", status: "paid", amount: 4500, cust: "cus_TR", at: g.Add(10*time.Minute + 40*s)})
	f.order(fixtureOrder{name: "rf1", client: f.shop, key: "tap-rf1", status: "paid", amount: 4500, cust: "cus_RF", at: g.Add(20 * time.Minute)})
	f.order(fixtureOrder{name: "rf2", client: f.shop, key: "tap-rf2", status: "paid", amount: 4500, cust: "cus_RF", at: g.Add(20*time.Minute + 20*s)})
	f.exec(`UPDATE orders SET status = 'refunded', refunded_amount = amount WHERE id = $1`, f.orders["rf1"])
	f.order(fixtureOrder{name: "cu1", client: f.shop, key: "tap-cu1", status: "paid", amount: 4500, cust: "cus_CU", at: g.Add(30 * time.Minute)})
	f.order(fixtureOrder{name: "cu2", client: f.shop, key: "tap-cu2", status: "paid", amount: 4500, cust: "cus_CU", at: g.Add(30*time.Minute + 20*s)})
	f.exec(`UPDATE orders SET currency = 'EUR' WHERE id = $1`, f.orders["cu2"])
	f.exec(`UPDATE payments SET currency = 'EUR' WHERE order_id = $1`, f.orders["cu2"])
	tests := []struct {
		name   string
		f      OrderFilter
		window time.Duration
		want   []string
	}{
		{"a day", OrderFilter{From: at0.Add(-7 * 24 * h), To: dt.Add(24 * h)}, 2 * time.Minute,
			[]string{"rf1+rf2", "tr1+tr2+tr3", "em1+em2", "dt1+dt2"}},
		{"two cards of one customer are two payments", OrderFilter{CustomerID: "cus_CD"}, time.Minute, nil},
		{"three taps are one group", OrderFilter{CustomerID: "cus_TR"}, time.Minute, []string{"tr1+tr2+tr3"}},
		{"three taps, the window of one tap", OrderFilter{CustomerID: "cus_TR"}, 20 * time.Second, []string{"tr1+tr2+tr3"}},
		{"a refunded order stays in its group", OrderFilter{CustomerID: "cus_RF"}, time.Minute, []string{"rf1+rf2"}},
		{"two currencies", OrderFilter{CustomerID: "cus_CU"}, time.Minute, nil},
		{"a client", OrderFilter{ClientID: f.shop, From: dt, To: dt.Add(h)}, 2 * time.Minute, []string{"dt1+dt2"}},
		{"another client", OrderFilter{ClientID: f.pos, From: dt, To: dt.Add(h)}, 2 * time.Minute, nil},
		{"a customer, no range", OrderFilter{CustomerID: "cus_DT"}, time.Minute, []string{"dt1+dt2"}},
		{"an email", OrderFilter{CustomerEmail: "zed@example.com"}, time.Minute, []string{"em1+em2"}},
		{"a window too short", OrderFilter{CustomerID: "cus_DT"}, 29 * time.Second, nil},
		{"the first order is outside the range", OrderFilter{From: dt.Add(time.Second), To: dt.Add(time.Minute)}, time.Minute, nil},
		{"a window long enough for w1+w2", OrderFilter{CustomerID: "cus_W"}, 10 * time.Minute, []string{"w1+w2"}},
		{"amount and card", OrderFilter{Amount: 4500, CardLast4: "4242", From: dt, To: dt.Add(2 * h)}, 2 * time.Minute,
			[]string{"em1+em2", "dt1+dt2"}},
	}
	for _, tt := range tests {
		taps, err := SuspectedDoubleTaps(ctx, f.db, tt.f, tt.window)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := names(taps); !slices.Equal(got, tt.want) {
			t.Errorf("%s: SuspectedDoubleTaps = %v, want %v", tt.name, got, tt.want)
		}
	}
	taps, _ := SuspectedDoubleTaps(ctx, f.db, OrderFilter{CustomerID: "cus_DT"}, time.Minute)
	if len(taps) != 1 || len(taps[0].Orders) != 2 || taps[0].Gap != 30*time.Second || !slices.Equal(taps[0].Orders[0].Keys, []string{"tap-1"}) ||
		!slices.Equal(taps[0].Orders[1].Keys, []string{"tap-2"}) || taps[0].Orders[1].Payment == nil {
		t.Errorf("dt1+dt2 = %+v", taps)
	}
	for _, n := range []string{"tr1", "tr2", "tr3"} {
		o, err := GetOrderDetail(ctx, f.db, f.orders[n])
		if err != nil {
			t.Fatal(err)
		}
		g, ok, err := DoubleTapsOf(ctx, f.db, o.OrderRow, time.Minute)
		if err != nil || !ok || names([]DoubleTap{g})[0] != "tr1+tr2+tr3" {
			t.Errorf("DoubleTapsOf(%s) = %v %v %v, want tr1+tr2+tr3", n, names([]DoubleTap{g}), ok, err)
		}
	}
	if o, err := GetOrderDetail(ctx, f.db, f.orders["cd2"]); err != nil {
		t.Fatal(err)
	} else if _, ok, err := DoubleTapsOf(ctx, f.db, o.OrderRow, time.Minute); ok || err != nil {
		t.Errorf("DoubleTapsOf(cd2) = %v, %v: another card is another payment", ok, err)
	}
	for _, bad := range []struct {
		f OrderFilter
		w time.Duration
	}{
		{OrderFilter{ClientID: f.shop}, time.Minute},               // neither a range nor a customer
		{OrderFilter{CustomerID: "cus_DT"}, 0},                     // no window
		{OrderFilter{CustomerID: "cus_DT"}, 25 * time.Hour},        // too long
		{OrderFilter{From: at0, ClientID: f.shop}, time.Minute},    // half a range
		{OrderFilter{To: at0, CardLast4: "4242"}, 2 * time.Minute}, // half a range
	} {
		if _, err := SuspectedDoubleTaps(ctx, f.db, bad.f, bad.w); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("SuspectedDoubleTaps(%+v, %s): err %v, want ErrInvalidQuery", bad.f, bad.w, err)
		}
	}
}
