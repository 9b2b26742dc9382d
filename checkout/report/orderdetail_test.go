package report

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
)

// An order's page lists every key that touched it: the order's own and its refunds', live,
// being swept (row and tombstone) or swept (tombstone only).
func TestGetOrderDetail(t *testing.T) {
	for name, d := range consoleDBs(t) {
		t.Run(name, func(t *testing.T) {
			f := seedConsole(t, d)
			ctx := context.Background()
			tests := []struct {
				order   string
				keys    []string // "key state refund?"
				refunds int
			}{
				{"a1", []string{"k-a1 completed order", "k-r1 completed refund", "k-r2 expired refund forget"}, 2},
				{"e1", []string{"k-settle completed order forget"}, 0},
				{"d1", []string{"k-swept expired order forget"}, 0},
				{"sk1", []string{"same-key expired order forget"}, 0},
				{"sk2", []string{"same-key completed order"}, 0},
			}
			for _, tt := range tests {
				o, err := GetOrderDetail(ctx, d, f.orders[tt.order])
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, k := range o.Keys {
					s := k.Key + " " + k.State + map[bool]string{true: " refund", false: " order"}[k.RefundID != nil]
					if k.ForgetAt != nil {
						s += " forget"
					}
					got = append(got, s)
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.keys) {
					t.Errorf("%s: keys %v, want %v", tt.order, got, tt.keys)
				}
				if len(o.Refunds) != tt.refunds || o.ID != f.orders[tt.order] || o.Metadata != nil {
					t.Errorf("%s: %d refunds, id %d, metadata %s", tt.order, len(o.Refunds), o.ID, o.Metadata)
				}
			}
			f.exec(`UPDATE orders SET metadata = '{"table":"7"}' WHERE id = $1`, f.orders["a2"])
			if o, err := GetOrderDetail(ctx, d, f.orders["a2"]); err != nil || string(o.Metadata) != `{"table": "7"}` {
				t.Errorf("metadata %s, %v", o.Metadata, err)
			}
			if _, err := GetOrderDetail(ctx, d, 123456789); !errors.Is(err, checkout.ErrOrderNotFound) {
				t.Errorf("unknown order: %v", err)
			}
		})
	}
}

// The request that created an order is its key's created event from the order's time on,
// not one of an earlier use of the key string.
func TestOrderArrivals(t *testing.T) {
	d := consoleDBs(t)["binary_parameters"]
	f := seedConsole(t, d)
	ctx := context.Background()
	f.event(f.shop, "k-a2", checkout.KindCreated, at0.Add(-30*24*time.Hour)) // an earlier use of the string
	rows, err := loadOrderRows(ctx, d, []int64{f.orders["a1"], f.orders["a2"], f.orders["dt1"]})
	if err != nil {
		t.Fatal(err)
	}
	got, err := OrderArrivals(ctx, d, rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[f.orders["a1"]].At.Equal(at0) || !got[f.orders["a2"]].At.Equal(at0.Add(2*time.Hour)) {
		t.Fatalf("arrivals %+v", got)
	}
	if e := got[f.orders["a1"]]; e.Kind != checkout.KindCreated || e.UserAgent != "tekrar-test/1" || e.RemoteAddr != "203.0.113.7" {
		t.Errorf("arrival of a1: %+v", e)
	}
	if _, ok := got[f.orders["dt1"]]; ok {
		t.Error("an order without a recorded created event has an arrival")
	}
	if none, err := OrderArrivals(ctx, d, nil); err != nil || len(none) != 0 {
		t.Errorf("no orders: %v %v", none, err)
	}
}

// The inbox names the order of an event about an installment charged after the first, as it
// does for an order's own charge.
func TestInboxNamesTheOrderOfAnInstallment(t *testing.T) {
	for name, d := range consoleDBs(t) {
		t.Run(name, func(t *testing.T) {
			f := seedConsole(t, d)
			order := f.orders["a1"]
			f.exec(`INSERT INTO installments (order_id, n, amount, due_on, due_at, status, attempts, provider_key,
			            provider_charge_id, paid_at, updated_at)
			        VALUES ($1, 2, 100, '2025-03-01', $2, 'paid', 1, 'tekrar_in_fixture', 'ch_installment_2', $2, $2)`, order, at0)
			f.exec(`INSERT INTO provider_events (provider, event_id, type, charge_id, sequence, body, outcome, received_at, last_delivery_at)
			        VALUES ('sandbox', 'evt_installment_2', 'charge.succeeded', 'ch_installment_2', 1, '{}', 'ignored', $1, $1)`, at0)
			events, _, err := Inbox(context.Background(), d, "ch_installment_2")
			if err != nil {
				t.Fatal(err)
			}
			var want string
			if err := d.Get(&want, `SELECT public_id::text FROM orders WHERE id = $1`, order); err != nil {
				t.Fatal(err)
			}
			if len(events) != 1 || events[0].OrderPublicID == nil || *events[0].OrderPublicID != want {
				t.Fatalf("inbox of the installment's charge: %+v, want its event with order %s", events, want)
			}
		})
	}
}
