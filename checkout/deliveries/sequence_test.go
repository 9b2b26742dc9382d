package deliveries_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
)

// TestRedeliveriesCarryTheEventsSequence: two events of one order, written by the outbox's
// writer, each dispatched twice and delivered to an endpoint that fails twice before it
// answers, then redelivered by hand. Every request of an event carries the same body, with
// the order's sequence the event was written with: 1, then 2.
func TestRedeliveriesCarryTheEventsSequence(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := newReceiver(t, f.clock, func(_ string, n int) string {
		if n <= 2 {
			return fail
		}
		return ok
	})
	client := f.client(t, "shop")
	e := f.endpoint(t, client, r.srv.URL+"/hooks", outbox.OrderPaid, outbox.OrderRefunded)
	r.trust(t, e.Secret)
	var order int64
	if err := f.db.Get(&order, `INSERT INTO orders (client_id, status, amount, currency, items, created_at, updated_at)
		VALUES ($1, 'paid', 1000, 'TRY', '[]', now(), now()) RETURNING id`, client); err != nil {
		t.Fatal(err)
	}
	var events []outbox.Event
	for _, typ := range []string{outbox.OrderPaid, outbox.OrderRefunded} {
		written, err := outbox.Insert(ctx, f.db, client, typ, sql.NullInt64{Int64: order, Valid: true}, map[string]any{"order": "ord_x"})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := outbox.Get(ctx, f.db, written.ID) // as the dispatch reads it
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a dispatch run twice fans out once
			tx, err := f.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := deliveries.CreateDeliveries(ctx, tx, ev); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		events = append(events, ev)
	}
	f.drive(t)
	var ids []int64
	if err := f.db.Select(&ids, `SELECT id FROM webhook_deliveries ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := f.deliverer.Attempt(ctx, id, true); err != nil { // an operator's redelivery
			t.Fatal(err)
		}
	}
	if len(ids) != len(events) {
		t.Fatalf("%d deliveries, want %d", len(ids), len(events))
	}
	for i, ev := range events {
		reqs := r.got(ev.ID)
		if len(reqs) != 4 {
			t.Errorf("%s: %d requests, want 4 (two failures, a success, a redelivery)", ev.Type, len(reqs))
			continue
		}
		for _, q := range reqs {
			var body struct {
				Data struct {
					Sequence int64 `json:"sequence"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(q.body), &body); err != nil {
				t.Fatal(err)
			}
			if q.body != reqs[0].body || body.Data.Sequence != int64(i+1) {
				t.Errorf("%s: a request carried sequence %d, want %d, in the same body each time:\n%s\n%s",
					ev.Type, body.Data.Sequence, i+1, q.body, reqs[0].body)
			}
		}
	}
}
