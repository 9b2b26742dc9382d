package deliveries_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
)

// outboxEvent writes an event of the client into the outbox at the test's clock and fans it
// out, as the outbox's dispatch does.
func (f *fixture) outboxEvent(t *testing.T, client int64, typ string, n int) outbox.Event {
	t.Helper()
	ctx := context.Background()
	var id string
	if err := f.db.GetContext(ctx, &id, `INSERT INTO outbox_events (client_id, type, payload, created_at)
		VALUES ($1, $2, $3, $4) RETURNING id`, client, typ, fmt.Sprintf(`{"order": "ord_%032d"}`, n), f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ev, err := outbox.Get(ctx, tx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deliveries.CreateDeliveries(ctx, tx, ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ev
}

// jobs gives the store a River client that only inserts: the test drives the deliveries
// itself (drive).
func (f *fixture) jobs(t *testing.T) {
	t.Helper()
	workers := river.NewWorkers()
	deliveries.AddWorkers(workers, f.deliverer)
	rc, err := outbox.NewClient(f.db.DB, workers, outbox.Config{Queues: map[string]river.QueueConfig{deliveries.Queue: {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	f.store.Jobs = rc.Client
}

// An endpoint that failed for the whole horizon is disabled, misses the events of the
// hours after, and is resent the window: the receiver gets every event of the window it
// never received exactly once more, under the event's id as its delivery rows say, and
// nothing of the events before or after the window. The same resend again queues nothing;
// another client cannot resend to the endpoint; a bad window is refused.
func TestResendWindowDeliversMissedEventsOnce(t *testing.T) {
	f := newFixture(t)
	f.jobs(t)
	ctx := context.Background()
	var down atomic.Bool
	r := newReceiver(t, f.clock, func(string, int) string {
		if down.Load() {
			return fail
		}
		return ok
	})
	client := f.client(t, "shop")
	e := f.endpoint(t, client, r.srv.URL, outbox.OrderPaid)
	r.trust(t, e.Secret)
	before := f.outboxEvent(t, client, outbox.OrderPaid, 0)
	f.drive(t)

	down.Store(true)
	f.clock.Advance(time.Minute)
	since := f.clock.Now()
	dead := f.outboxEvent(t, client, outbox.OrderPaid, 1)
	f.drive(t) // three days of failures: the delivery dies and the endpoint is disabled
	got, err := f.store.Get(ctx, client, e.ID)
	if err != nil || got.Status != "disabled" {
		t.Fatalf("after the horizon the endpoint is %q (%v), want disabled", got.Status, err)
	}
	missed := []outbox.Event{dead}
	for i := range 3 {
		f.clock.Advance(time.Minute)
		missed = append(missed, f.outboxEvent(t, client, outbox.OrderPaid, 10+i))
		f.outboxEvent(t, client, outbox.OrderRefunded, 20+i) // not subscribed
	}
	f.clock.Advance(time.Minute)
	until := f.clock.Now()
	after := f.outboxEvent(t, client, outbox.OrderPaid, 30)
	var rows int
	if err := f.db.Get(&rows, `SELECT count(*) FROM webhook_deliveries`); err != nil || rows != 2 {
		t.Fatalf("%d deliveries before the resend (%v), want 2: a disabled endpoint gets none", rows, err)
	}
	down.Store(false)
	failedBefore := len(r.got(dead.ID))
	if failedBefore < 2 {
		t.Fatalf("%d failed requests before the endpoint was disabled", failedBefore)
	}

	w := deliveries.Window{Since: since, Until: until}
	res, err := f.store.Resend(ctx, client, e.ID, w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Queued != len(missed) || res.Events != len(missed) || !res.Reenabled {
		t.Fatalf("resend: %+v, want %d events queued and the endpoint enabled", res, len(missed))
	}
	f.drive(t)
	for _, ev := range missed {
		want := 1
		if ev.ID == dead.ID {
			want += failedBefore
		}
		if n := len(r.got(ev.ID)); n != want {
			t.Errorf("%s: %d requests, want %d", ev.ID, n, want)
		}
	}
	for _, ev := range []outbox.Event{before, after} {
		if n := len(r.got(ev.ID)); n != map[string]int{before.ID: 1, after.ID: 0}[ev.ID] {
			t.Errorf("%s, outside the window: %d requests", ev.ID, n)
		}
	}
	// Every delivery row's event id is the webhook-id the receiver got, with its payload.
	var ds []struct {
		EventID string `db:"event_id"`
		Payload string `db:"payload"`
		State   string `db:"state"`
	}
	if err := f.db.Select(&ds, `SELECT event_id, payload, state FROM webhook_deliveries ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1+len(missed) {
		t.Fatalf("%d deliveries, want %d", len(ds), 1+len(missed))
	}
	for _, d := range ds {
		reqs := r.got(d.EventID)
		if d.State != deliveries.StateSucceeded || len(reqs) == 0 || reqs[len(reqs)-1].body != d.Payload {
			t.Errorf("delivery of %s: %s, last request %v", d.EventID, d.State, reqs)
		}
	}
	var applied int
	if err := r.db.Get(&applied, `SELECT count(*) FROM applied`); err != nil || applied != 1+len(missed) {
		t.Errorf("%d events applied (%v), want %d", applied, err, 1+len(missed))
	}

	again, err := f.store.Resend(ctx, client, e.ID, w)
	if err != nil || again.Queued != 0 || again.Reenabled || again.Events != len(missed) {
		t.Fatalf("the same resend again: %+v, %v; want nothing queued", again, err)
	}
	if n := f.drive(t); n != 0 {
		t.Errorf("the second resend made %d attempts", n)
	}

	other := f.client(t, "another shop")
	if _, err := f.store.Resend(ctx, other, e.ID, w); !errors.Is(err, deliveries.ErrEndpointNotFound) {
		t.Errorf("another client's resend: %v, want not found", err)
	}
	for _, bad := range []deliveries.Window{
		{Since: until, Until: since},
		{Until: until},
		{Since: since},
		{Since: f.clock.Now().Add(-deliveries.MaxResendAge - time.Hour), Until: until},
	} {
		var invalid deliveries.InvalidError
		if _, err := f.store.Resend(ctx, client, e.ID, bad); !errors.As(err, &invalid) {
			t.Errorf("window %+v: %v, want invalid", bad, err)
		}
	}
}
