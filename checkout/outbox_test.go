package checkout

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
)

// eventCounts counts the client's events by type.
// eventStep is a step of a test and the events it must add, by type.
type eventStep struct {
	name string
	do   func()
	want map[string]int64 // events added by the step
}

// checkEventSteps runs the steps in order from the event counts have, checking after each
// that it added exactly its events, and at the end that every event is queued for dispatch once.
func (e *actionEnv) checkEventSteps(have map[string]int64, steps []eventStep) {
	e.t.Helper()
	for _, s := range steps {
		s.do()
		want := maps.Clone(have)
		for typ, n := range s.want {
			want[typ] += n
		}
		got := e.eventCounts()
		if !maps.Equal(got, want) {
			e.t.Fatalf("after %q: events %v, want %v", s.name, got, want)
		}
		have = got
	}
	// Nothing dispatches here (the app's background work is not running): every event waits
	// in the queue, once.
	if n := e.count(`SELECT count(*) FROM outbox_events ev
		 WHERE (SELECT count(*) FROM outbox_queue q WHERE q.event_id = ev.id) <> 1`); n != 0 {
		e.t.Errorf("%d events not queued for dispatch exactly once", n)
	}
	if n := e.count(`SELECT count(*) FROM outbox_queue q WHERE NOT EXISTS (SELECT 1 FROM outbox_events ev WHERE ev.id = q.event_id)`); n != 0 {
		e.t.Errorf("%d queued dispatches without their event", n)
	}
}

func (e *actionEnv) eventCounts() map[string]int64 {
	e.t.Helper()
	rows, err := e.db.Query(`SELECT type, count(*) FROM outbox_events WHERE client_id = $1 GROUP BY type`, e.client.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var typ string
		var n int64
		if err := rows.Scan(&typ, &n); err != nil {
			e.t.Fatal(err)
		}
		out[typ] = n
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestEachChangeWritesItsEventOnce drives the domain through each change that has an
// event, and the ones that must not write one (replays, a pass with nothing to do), and
// checks after each step which events were added: exactly the change's own, once. Every
// event is queued for dispatch once.
func TestEachChangeWritesItsEventOnce(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	completer := newCompleter(e.s, CompleterConfig{Grace: time.Minute, AttentionAfter: time.Hour, Batch: 100})
	pass := func() {
		t.Helper()
		if _, err := completer.Pass(ctx); err != nil {
			t.Fatalf("completer: %v", err)
		}
	}
	var paid string
	steps := []eventStep{
		{"pay", func() {
			var st int
			if paid, st = e.order("k-paid", psp.TokenVisa, 5000); st != http.StatusCreated {
				t.Fatalf("pay: %d", st)
			}
		}, map[string]int64{outbox.OrderPaid: 1}},
		{"replay the payment", func() { e.order("k-paid", psp.TokenVisa, 5000) }, nil},
		{"decline", func() {
			if _, st := e.order("k-declined", psp.TokenDeclined, 5000); st != http.StatusPaymentRequired {
				t.Fatalf("decline: %d", st)
			}
		}, map[string]int64{outbox.OrderDeclined: 1}},
		{"replay the decline", func() { e.order("k-declined", psp.TokenDeclined, 5000) }, nil},
		{"refund", func() {
			if st := e.refund("k-refund", paid, 1000); st != http.StatusCreated {
				t.Fatalf("refund: %d", st)
			}
		}, map[string]int64{outbox.RefundCreated: 1, outbox.OrderRefunded: 1}},
		{"replay the refund", func() { e.refund("k-refund", paid, 1000) }, nil},
		{"a payment whose outcome is unknown", func() {
			e.p.set("down")
			if _, st := e.order("k-unknown", psp.TokenVisa, 5000); st != http.StatusServiceUnavailable {
				t.Fatalf("provider down: %d", st)
			}
		}, nil},
		{"completer: still unknown, not yet for an operator", func() { e.advance(2 * time.Minute); pass() }, nil},
		{"completer: unknown for an hour, handed to an operator", func() { e.advance(time.Hour); pass() },
			map[string]int64{outbox.OrderNeedsAttention: 1}},
		{"completer: nothing left to hand over", func() { e.advance(time.Hour); pass() }, nil},
		{"a payment abandoned at a provider that cannot cancel", func() {
			if _, st := e.order("k-abandoned", psp.TokenVisa, 5000); st != http.StatusServiceUnavailable {
				t.Fatalf("provider down: %d", st)
			}
			e.p.Provider = psp.NewSandbox(e.db, psp.SandboxOptions{NoCancel: true})
			e.p.set("")
		}, nil},
		{"completer: canceled with a refund owed", func() { e.advance(2 * time.Minute); pass() },
			map[string]int64{outbox.CompensationCreated: 1}},
		{"completer: nothing more owed", func() { e.advance(2 * time.Minute); pass() }, nil},
	}
	e.checkEventSteps(map[string]int64{}, steps)

	// The payload is the documented one.
	var data map[string]any
	if err := json.Unmarshal([]byte(e.str(`SELECT payload::text FROM outbox_events WHERE type = 'order.paid'`)), &data); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"order": paid, "status": "paid", "amount": float64(5000), "currency": "TRY", "sequence": float64(1)}
	if !maps.Equal(data, want) {
		t.Errorf("order.paid data %v, want %v", data, want)
	}
}
