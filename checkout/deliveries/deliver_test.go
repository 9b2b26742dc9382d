package deliveries_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// Every event reaches a receiver that fails, hangs, applies and then answers too late, and
// answers slowly: each delivery ends succeeded, every request of an event carried the
// event's id as webhook-id and the same body, every signature verified, and the merchant's
// database applied each event exactly once.
func TestEveryEventDeliveredOnce(t *testing.T) {
	f := newFixture(t)
	script := []string{fail, hang, slowDup, fail, slow}
	r := newReceiver(t, f.clock, func(_ string, n int) string {
		if n <= len(script) {
			return script[n-1]
		}
		return ok
	})
	client := f.client(t, "shop")
	e := f.endpoint(t, client, r.srv.URL+"/hooks")
	r.trust(t, e.Secret)
	other := f.client(t, "another shop") // its events are not this endpoint's
	var events []outbox.Event
	for i := range 5 {
		events = append(events, f.event(t, client, "order.paid", i))
	}
	f.event(t, other, "order.paid", 99)
	f.event(t, client, "order.refunded", 98) // a type the endpoint did not subscribe to

	f.drive(t)

	var states []string
	if err := f.db.Select(&states, `SELECT state FROM webhook_deliveries ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(states) != len(events) {
		t.Fatalf("%d deliveries, want one per subscribed event (%d)", len(states), len(events))
	}
	for i, s := range states {
		if s != deliveries.StateSucceeded {
			t.Errorf("delivery %d is %s", i, s)
		}
	}
	if _, refused := r.counts(); refused != 0 {
		t.Errorf("%d requests did not verify", refused)
	}
	for _, ev := range events {
		reqs := r.got(ev.ID)
		if len(reqs) < len(script) {
			t.Errorf("%s: %d requests under its id, want at least %d (one per scripted answer)", ev.ID, len(reqs), len(script))
			continue
		}
		var body struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(reqs[0].body), &body); err != nil || body.ID != ev.ID || body.Type != ev.Type {
			t.Errorf("%s: body %s (%v)", ev.ID, reqs[0].body, err)
		}
		for _, q := range reqs[1:] {
			if q.body != reqs[0].body {
				t.Errorf("%s: a retry sent another body:\n%s\n%s", ev.ID, q.body, reqs[0].body)
			}
		}
	}
	var applied, receipts int
	if err := r.db.Get(&applied, `SELECT count(*) FROM applied`); err != nil {
		t.Fatal(err)
	}
	if err := r.db.Get(&receipts, `SELECT count(*) FROM webhook_receipts`); err != nil {
		t.Fatal(err)
	}
	if applied != len(events) || receipts != len(events) {
		t.Fatalf("the merchant applied %d events (%d receipts), want %d: each once", applied, receipts, len(events))
	}
	// Attempts are recorded with what the endpoint answered.
	var rows []struct {
		Status  *int    `db:"status_code"`
		Error   *string `db:"error"`
		Latency int     `db:"latency_ms"`
	}
	if err := f.db.Select(&rows, `SELECT status_code, error, latency_ms FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.event_id = $1 ORDER BY a.id`, events[0].ID); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(script) || rows[0].Status == nil || *rows[0].Status != 500 || rows[1].Status != nil || rows[1].Error == nil ||
		*rows[len(rows)-1].Status != 204 || rows[len(rows)-1].Latency < 50 {
		t.Fatalf("attempts of %s: %+v", events[0].ID, rows)
	}
}

// An endpoint that fails every delivery is retried with growing delays until the horizon,
// about three days after the event, then the delivery is dead and the endpoint disabled,
// with why and when. Another endpoint whose other delivery succeeded during the horizon is
// not disabled by its dead one.
func TestRetriedUntilTheHorizonThenDeadAndDisabled(t *testing.T) {
	f := newFixture(t)
	down := newReceiver(t, f.clock, func(string, int) string { return fail })
	client := f.client(t, "shop")
	e := f.endpoint(t, client, down.srv.URL)
	down.trust(t, e.Secret)
	start := f.clock.Now()
	ev := f.event(t, client, "order.paid", 1)

	f.drive(t)

	var d struct {
		State    string     `db:"state"`
		Attempts int        `db:"attempts"`
		Finished *time.Time `db:"finished_at"`
		Next     *time.Time `db:"next_attempt_at"`
	}
	if err := f.db.Get(&d, `SELECT state, attempts, finished_at, next_attempt_at FROM webhook_deliveries WHERE event_id = $1`, ev.ID); err != nil {
		t.Fatal(err)
	}
	if d.State != deliveries.StateDead || d.Finished == nil || d.Next != nil {
		t.Fatalf("delivery after the horizon: %+v", d)
	}
	if got := d.Finished.Sub(start); got != deliveries.Horizon {
		t.Errorf("dead %s after the event, want the horizon, %s", got, deliveries.Horizon)
	}
	t.Logf("%d attempts over the horizon", d.Attempts)
	// 30s doubling to 6h, then every 6h, over 72h: 22 attempts with the jitter at its middle.
	if d.Attempts < 15 || d.Attempts > 30 || len(down.got(ev.ID)) != d.Attempts {
		t.Errorf("%d attempts recorded, %d received; want about 20 over three days", d.Attempts, len(down.got(ev.ID)))
	}
	var gaps []float64
	if err := f.db.Select(&gaps, `SELECT extract(epoch FROM attempted_at - lag(attempted_at) OVER (ORDER BY id)) FROM webhook_attempts ORDER BY id OFFSET 1`); err != nil {
		t.Fatal(err)
	}
	if gaps[0] != 30 || gaps[1] != 60 || gaps[2] != 120 {
		t.Errorf("first retry delays %v s, want 30, 60, 120", gaps[:3])
	}
	got, err := f.store.Get(context.Background(), client, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "disabled" || got.DisabledAt == nil || !got.DisabledAt.Equal(*d.Finished) || got.DisabledReason == nil ||
		!strings.Contains(*got.DisabledReason, "HTTP 500") {
		t.Fatalf("endpoint after failing for the whole horizon: %+v", got)
	}
	// Nothing more is sent: a later event to a disabled endpoint creates no delivery.
	before, _ := down.counts()
	f.event(t, client, "order.paid", 2)
	if after, _ := down.counts(); f.drive(t) != 0 || after != before {
		t.Fatal("a disabled endpoint was sent a later event")
	}
}

func TestEndpointThatSucceededMeanwhileStaysEnabled(t *testing.T) {
	f := newFixture(t)
	var failing atomic.Value
	failing.Store("")
	r := newReceiver(t, f.clock, func(id string, _ int) string {
		if id == failing.Load() {
			return fail
		}
		return ok
	})
	client := f.client(t, "shop")
	e := f.endpoint(t, client, r.srv.URL)
	r.trust(t, e.Secret)
	failing.Store(f.event(t, client, "order.paid", 1).ID)
	f.clock.Set(f.clock.Now().Add(24 * time.Hour))
	f.event(t, client, "order.paid", 2) // created while the first is being retried: succeeds
	f.drive(t)
	var states []string
	if err := f.db.Select(&states, `SELECT state FROM webhook_deliveries ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 || states[0] != deliveries.StateDead || states[1] != deliveries.StateSucceeded {
		t.Fatalf("deliveries %v, want dead and succeeded", states)
	}
	got, err := f.store.Get(context.Background(), client, e.ID)
	if err != nil || got.Status != "enabled" {
		t.Fatalf("an endpoint that succeeded during the horizon: %+v %v", got, err)
	}
}

// During a rotation's overlap every delivery is signed with the old and the new secret, and
// verifies under either; after it, only under the new one.
func TestRotationSignsWithBothDuringTheOverlap(t *testing.T) {
	f := newFixture(t)
	r := newReceiver(t, f.clock, func(string, int) string { return ok })
	client := f.client(t, "shop")
	e := f.endpoint(t, client, r.srv.URL)
	old := e.Secret
	rotated, err := f.store.RotateSecret(context.Background(), client, e.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == "" || rotated.Secret == old || rotated.RotatingUntil == nil {
		t.Fatalf("rotation answered %+v", rotated)
	}
	send := func(n int) request {
		t.Helper()
		r.trust(t, old, rotated.Secret) // the receiver accepts both; each is checked alone below
		ev := f.event(t, client, "order.paid", n)
		f.drive(t)
		reqs := r.got(ev.ID)
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		return reqs[0]
	}
	verifies := func(q request, secret string) bool {
		k, _ := stdwebhook.ParseSecret(secret)
		var id string
		if err := json.Unmarshal([]byte(q.body), &struct {
			ID *string `json:"id"`
		}{&id}); err != nil {
			t.Fatal(err)
		}
		h := stdwebhook.Headers(id, f.clock.Now(), nil)
		h.Set(stdwebhook.HeaderSignature, q.signature)
		_, err := stdwebhook.Verifier{Keys: []stdwebhook.Key{k}, Now: f.clock.Now, Tolerance: 365 * 24 * time.Hour}.Verify(h, []byte(q.body))
		return err == nil
	}
	during := send(1)
	if n := len(strings.Fields(during.signature)); n != 2 {
		t.Fatalf("%d signatures during the overlap, want 2", n)
	}
	if !verifies(during, old) || !verifies(during, rotated.Secret) {
		t.Fatal("during the overlap a delivery must verify under the old secret and under the new")
	}
	f.clock.Set(f.clock.Now().Add(time.Hour + time.Second))
	after := send(2)
	if n := len(strings.Fields(after.signature)); n != 1 {
		t.Fatalf("%d signatures after the overlap, want 1", n)
	}
	if verifies(after, old) || !verifies(after, rotated.Secret) {
		t.Fatal("after the overlap a delivery must verify under the new secret only")
	}
}
