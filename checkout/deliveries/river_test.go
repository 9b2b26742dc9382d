package deliveries_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/outbox"
)

// The whole path on River: events written to the outbox are dispatched, fanned out to the
// endpoint and delivered by jobs; the receiver fails, hangs and answers late before it
// succeeds, and every event is applied once by the merchant. A second fan-out of the same
// events (the outbox retrying a dispatch) queues nothing more.
func TestDeliveredThroughTheOutbox(t *testing.T) {
	f := newFixture(t)
	f.deliverer.Now = nil // River schedules on the wall clock
	f.deliverer.FirstRetry = 20 * time.Millisecond
	script := []string{fail, hang, slowDup}
	r := newReceiver(t, &checkouttest.Clock{}, func(_ string, n int) string {
		if n <= len(script) {
			return script[n-1]
		}
		return ok
	})
	r.now = time.Now
	client := f.client(t, "shop")
	e := f.endpoint(t, client, r.srv.URL)
	r.trust(t, e.Secret)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []string
	for i := range 8 {
		ev, err := outbox.Insert(ctx, f.db, client, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	workers := river.NewWorkers()
	deliveries.AddWorkers(workers, f.deliverer)
	rc, err := outbox.NewClient(f.db.DB, workers, outbox.Config{Handlers: []outbox.Handler{deliveries.Handler{}}, PollInterval: 20 * time.Millisecond,
		Queues: map[string]river.QueueConfig{deliveries.Queue: {MaxWorkers: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	completed, stop := rc.Subscribe(river.EventKindJobCompleted)
	defer stop()
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background())
	delivered := 0
	for delivered < len(ids) {
		select {
		case ev := <-completed:
			if ev.Job.Kind == (deliveries.DeliverArgs{}).Kind() {
				delivered++
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d deliveries completed", delivered, len(ids))
		}
	}
	var succeeded int
	if err := f.db.Get(&succeeded, `SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'`); err != nil {
		t.Fatal(err)
	}
	var applied int
	if err := r.db.Get(&applied, `SELECT count(*) FROM applied`); err != nil {
		t.Fatal(err)
	}
	if succeeded != len(ids) || applied != len(ids) {
		t.Fatalf("%d deliveries succeeded, %d events applied; want %d each", succeeded, applied, len(ids))
	}
	for _, id := range ids {
		if n := len(r.got(id)); n < len(script)+1 {
			t.Errorf("%s: %d requests, want %d", id, n, len(script)+1)
		}
	}
	// The outbox dispatching an event again creates no delivery and queues no job.
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := outbox.Get(ctx, tx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if n, err := deliveries.FanOut(ctx, tx, rc.Client, ev, deliveries.InFlight{}); err != nil || n != 0 {
		t.Fatalf("a second fan-out: %d deliveries, %v", n, err)
	}
	tx.Rollback()
}
