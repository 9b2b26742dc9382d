package deliveries_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/receipts"
	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
)

// An endpoint that fails for the whole horizon is disabled once, and the transaction that
// disables it queues its notice: the job is in River's table before any worker runs (a crash
// then loses nothing), and once River runs, the client's contact address gets exactly one
// message that names the endpoint, its URL without the query, since when and why, and how
// to resend, and no secret. A client without a contact address gets nothing.
func TestDisabledEndpointWritesOnceToTheContact(t *testing.T) {
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	const from = "tekrar <hooks@tekrar.example>"
	workers := river.NewWorkers()
	deliveries.AddWorkers(workers, f.deliverer)
	deliveries.AddNoticeWorker(workers, &deliveries.NoticeWorker{DB: f.db, From: from,
		Mailer: &receipts.Mailer{Server: mb.Server, From: from}})
	rc, err := outbox.NewClient(f.db.DB, workers, outbox.Config{PollInterval: 20 * time.Millisecond,
		Queues: map[string]river.QueueConfig{deliveries.Queue: {MaxWorkers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	f.deliverer.Jobs = rc.Client
	r := newReceiver(t, f.clock, func(string, int) string { return fail })
	shop, quiet := f.client(t, "shop"), f.client(t, "quiet shop")
	f.db.MustExec(`UPDATE clients SET contact_email = 'ops@shop.example' WHERE id = $1`, shop)
	e := f.endpoint(t, shop, r.srv.URL+"/hooks?token=receiver-s3cret")
	q := f.endpoint(t, quiet, r.srv.URL+"/quiet")
	r.trust(t, e.Secret, q.Secret)
	f.event(t, shop, outbox.OrderPaid, 1)
	f.event(t, shop, outbox.OrderPaid, 2)
	f.event(t, quiet, outbox.OrderPaid, 3)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	disabled := 0
	for range 10000 {
		var due []int64
		if err := f.db.Select(&due, `SELECT id FROM webhook_deliveries WHERE state = 'pending' ORDER BY next_attempt_at, id LIMIT 1`); err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		var at time.Time
		if err := f.db.Get(&at, `SELECT next_attempt_at FROM webhook_deliveries WHERE id = $1`, due[0]); err != nil {
			t.Fatal(err)
		}
		f.clock.Forward(at)
		out, err := f.deliverer.Attempt(ctx, due[0], false)
		if err != nil {
			t.Fatal(err)
		}
		if out.Disabled {
			disabled++
		}
	}
	if disabled != 2 {
		t.Fatalf("%d attempts disabled an endpoint, want 2 (one per client's endpoint)", disabled)
	}
	var queued int
	if err := f.db.Get(&queued, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'available'`, deliveries.NoticeArgs{}.Kind()); err != nil || queued != 2 {
		t.Fatalf("%d notices queued (%v), want 2 before River runs", queued, err)
	}

	completed, stop := rc.Subscribe(river.EventKindJobCompleted)
	defer stop()
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background())
	for done := 0; done < 2; {
		select {
		case ev := <-completed:
			if ev.Job.Kind == (deliveries.NoticeArgs{}).Kind() {
				done++
			}
		case <-ctx.Done():
			t.Fatalf("%d of 2 notice jobs completed", done)
		}
	}
	msgs := mb.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages sent, want 1: the client without a contact address gets none", len(msgs))
	}
	m := msgs[0]
	body := string(m.Data)
	if len(m.To) != 1 || m.To[0] != "ops@shop.example" {
		t.Errorf("sent to %v", m.To)
	}
	for _, want := range []string{e.ID, r.srv.URL + "/hooks", "/v1/webhook-endpoints/" + e.ID + "/resend", "Disabled: ", "every delivery failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("the notice does not say %q:\n%s", want, body)
		}
	}
	for _, secret := range []string{e.Secret, strings.TrimPrefix(e.Secret, "whsec_"), "receiver-s3cret"} {
		if strings.Contains(body, secret) {
			t.Errorf("the notice shows a secret %q:\n%s", secret, body)
		}
	}
}
