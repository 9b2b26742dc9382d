package receipts

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
)

// TestEventToReceiptThroughRiver: an order.paid event in the outbox is dispatched by River
// to the receipts handler, whose send job (inserted in the dispatch transaction) sends one
// message with the event's Message-ID; the other event types make no receipt.
func TestEventToReceiptThroughRiver(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	client := f.client("Shop")
	order, oid := f.paidOrder(client, "ayse@example.com")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ev, err := outbox.Insert(ctx, f.db.DB, client, outbox.OrderPaid, sql.NullInt64{Int64: oid, Valid: true}, map[string]any{"order": order})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Insert(ctx, f.db.DB, client, outbox.RefundCreated, sql.NullInt64{Int64: oid, Valid: true}, map[string]any{"order": order, "refund": "rf_x"}); err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	AddWorkers(workers, sender(f, mb))
	rc, err := outbox.NewClient(f.db.DB, workers, outbox.Config{Handlers: []outbox.Handler{&Handler{Recorder: sending}}, Workers: 2, PollInterval: 50 * time.Millisecond,
		Queues: map[string]river.QueueConfig{Queue: {MaxWorkers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	completed, stop := rc.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer stop()
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background())
	for sent := false; !sent; {
		select {
		case e := <-completed:
			if e.Kind == river.EventKindJobFailed {
				t.Fatalf("job %s failed: %v", e.Job.Kind, e.Job.Errors)
			}
			sent = e.Job.Kind == SendArgs{}.Kind()
		case <-ctx.Done():
			t.Fatal("no receipt was sent")
		}
	}
	msgs := mb.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	if got := parse(t, msgs[0].Data).Header.Get("Message-ID"); got != "<"+ev.ID+".receipt@shop.example>" {
		t.Errorf("Message-ID %q for event %s", got, ev.ID)
	}
	if n := f.count(`state = 'sent' AND event_id = $1`, ev.ID); n != 1 || f.count(`true`) != 1 {
		t.Errorf("receipts: %d sent for the event, %d in all", n, f.count(`true`))
	}
	var jobs int
	if err := f.db.Get(&jobs, `SELECT count(*) FROM river_job WHERE kind = $1`, SendArgs{}.Kind()); err != nil || jobs != 1 {
		t.Errorf("%d send jobs (%v)", jobs, err)
	}
}

// TestAnEventWithoutAReceiptIsLetGo: an event whose order or refund does not exist, or
// whose data cannot be read, makes no receipt and no error (retrying the dispatch could not
// change it, and would hold up the event's other consumers); a database failure is an error.
func TestAnEventWithoutAReceiptIsLetGo(t *testing.T) {
	f := newFixture(t)
	client := f.client("Shop")
	order, _ := f.paidOrder(client, "ayse@example.com")
	h := &Handler{Recorder: sending}
	for _, ev := range []outbox.Event{
		{ID: eventID(), Type: outbox.OrderPaid, Payload: []byte(`{"order":"ord_00000000000000000000000000000000"}`)},
		{ID: eventID(), Type: outbox.OrderRefunded, Payload: []byte(`{"order":"` + order + `","refund":"rf_00000000000000000000000000000000"}`)},
		{ID: eventID(), Type: outbox.OrderPaid, Payload: []byte(`not json`)},
		{ID: "evt_bad id", Type: outbox.OrderPaid, Payload: []byte(`{"order":"` + order + `"}`)},
		{ID: eventID(), Type: outbox.OrderDeclined, Payload: []byte(`{"order":"` + order + `"}`)},
	} {
		tx, err := f.db.DB.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.HandleEvent(context.Background(), tx, ev); err != nil {
			t.Errorf("%s %s: %v", ev.Type, ev.Payload, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.count(`true`); n != 0 {
		t.Errorf("%d receipts", n)
	}
	tx, err := f.db.DB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback()
	if err := h.HandleEvent(context.Background(), tx, outbox.Event{ID: eventID(), Type: outbox.OrderPaid, Payload: []byte(`{"order":"` + order + `"}`)}); err == nil {
		t.Error("a failed transaction was not an error")
	}
}
