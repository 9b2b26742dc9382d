package installments

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
)

// installmentEvents returns the data of the events of type typ of order id, oldest first.
func (e *installmentEnv) installmentEvents(id int64, typ string) []map[string]any {
	e.T.Helper()
	var payloads []string
	if err := e.DB.Select(&payloads, `SELECT payload::text FROM outbox_events WHERE order_id = $1 AND type = $2
		 ORDER BY created_at, payload->'installment'->>'attempts'`, id, typ); err != nil {
		e.T.Fatal(err)
	}
	out := make([]map[string]any, len(payloads))
	for i, p := range payloads {
		if err := json.Unmarshal([]byte(p), &out[i]); err != nil {
			e.T.Fatal(err)
		}
	}
	return out
}

// installmentData is the documented data of an installment event: the order's, then the
// installment as recorded, and the order's sequence: its order.paid is 1, each later event
// one more.
func installmentData(order string, orderAmount int64, sequence float64, inst map[string]any) map[string]any {
	return map[string]any{"order": order, "status": "paid", "amount": float64(orderAmount), "currency": "TRY",
		"sequence": sequence, "installment": inst}
}

// TestInstallmentOutcomesWriteTheirEvents: a client in Istanbul (its days start at 21:00 UTC)
// with two orders on one saved card. Each outcome the job records writes its event, once:
// a paid installment installment.paid, a decline installment.declined with the day of the
// retry, the decline of the last retry installment.needs_attention, and so does a charge the
// provider refuses. Reruns at the same instant write nothing. Every event has its dispatch
// job, and its data is the documented one.
func TestInstallmentOutcomesWriteTheirEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInstallmentEnv(t, "Europe/Istanbul", checkouttest.UTC("2027-01-15T09:00:00Z"))
	pubA, idA := e.Plan("k-pays", 1000, 3) // due Feb 15 and Mar 15
	e.Set(checkouttest.UTC("2027-01-20T09:00:00Z"))
	pubB, idB := e.Plan("k-declines", 2000, 2) // due Feb 20
	card := func(token string) {
		t.Helper()
		if err := e.Sandbox.ReplacePaymentMethodCard(ctx, e.Card.ID, token); err != nil {
			t.Fatal(err)
		}
	}
	run := func(at string) func() { return func() { e.run(at) } }
	steps := []eventStep{
		{"A's second installment is paid", run("2027-02-14T21:00:00Z"), map[string]int64{outbox.InstallmentPaid: 1}},
		{"a rerun", run("2027-02-14T21:00:00Z"), nil},
		{"B's second is declined", func() { card(psp.TokenDeclined); e.run("2027-02-19T21:00:00Z") },
			map[string]int64{outbox.InstallmentDeclined: 1}},
		{"a rerun the same day", run("2027-02-19T23:00:00Z"), nil},
		{"first retry, declined", run("2027-02-20T21:00:00Z"), map[string]int64{outbox.InstallmentDeclined: 1}},
		{"second retry, declined", run("2027-02-22T21:00:00Z"), map[string]int64{outbox.InstallmentDeclined: 1}},
		{"last retry, declined: for an operator", run("2027-02-26T21:00:00Z"), map[string]int64{outbox.InstallmentNeedsAttention: 1}},
		{"nothing due", run("2027-03-10T00:00:00Z"), nil},
		{"A's third refused by the provider", func() {
			c, err := e.c.claimInstallment(ctx, checkouttest.UTC("2027-03-14T21:00:00Z"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Sandbox.CancelCharge(ctx, c.Key); err != nil {
				t.Fatal(err)
			}
			var res Result
			if err := e.c.chargeInstallment(ctx, c, checkouttest.UTC("2027-03-14T21:00:00Z"), &res); err != nil || res.Attention != 1 {
				t.Fatalf("refused charge: %+v %v", res, err)
			}
		}, map[string]int64{outbox.InstallmentNeedsAttention: 1}},
		{"nothing left", run("2027-12-31T00:00:00Z"), nil},
	}
	e.checkEventSteps(e.eventCounts(), steps) // from the orders' own order.paid

	chargeA2 := e.Text(`SELECT provider_charge_id FROM installments WHERE order_id = $1 AND n = 2`, idA)
	check := func(name string, got []map[string]any, want ...map[string]any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	check("installment.paid of A", e.installmentEvents(idA, outbox.InstallmentPaid),
		installmentData(pubA, 1000, 2, map[string]any{"n": 2.0, "count": 3.0, "amount": 333.0, "due_on": "2027-02-15",
			"status": "paid", "attempts": 1.0, "charge": chargeA2, "decline_code": nil, "next_attempt_at": nil}))
	declined := func(attempts float64, next string) map[string]any {
		return installmentData(pubB, 2000, 1+attempts, map[string]any{"n": 2.0, "count": 2.0, "amount": 1000.0, "due_on": "2027-02-20",
			"status": "scheduled", "attempts": attempts, "charge": nil, "decline_code": "card_declined", "next_attempt_at": next})
	}
	// Retries as the 1st, 3rd and 7th day after the due date start in Istanbul.
	check("installment.declined of B", e.installmentEvents(idB, outbox.InstallmentDeclined),
		declined(1, "2027-02-20T21:00:00Z"), declined(2, "2027-02-22T21:00:00Z"), declined(3, "2027-02-26T21:00:00Z"))
	lastB := installmentData(pubB, 2000, 5, map[string]any{"n": 2.0, "count": 2.0, "amount": 1000.0, "due_on": "2027-02-20",
		"status": "attention", "attempts": 4.0, "charge": nil, "decline_code": "card_declined", "next_attempt_at": nil})
	lastB["reason"] = "retries_exhausted"
	check("installment.needs_attention of B", e.installmentEvents(idB, outbox.InstallmentNeedsAttention), lastB)
	refusedA := installmentData(pubA, 1000, 3, map[string]any{"n": 3.0, "count": 3.0, "amount": 333.0, "due_on": "2027-03-15",
		"status": "attention", "attempts": 1.0, "charge": nil, "decline_code": "provider_refused", "next_attempt_at": nil})
	refusedA["reason"] = "provider_refused"
	check("installment.needs_attention of A", e.installmentEvents(idA, outbox.InstallmentNeedsAttention), refusedA)
}

// TestAFencedInstallmentOutcomeWritesNoEvent: a run frozen before it calls the provider wakes
// after another took its installment over, and records whatever the provider tells it (a
// charge, a decline, a refusal): its statement matches no row, and writes no event either.
// The run that holds the lease records the outcome with its one event.
func TestAFencedInstallmentOutcomeWritesNoEvent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		token string
		// refuse cancels the attempt's key at the provider, which then refuses the charge.
		refuse bool
		want   string
	}{
		{"paid", psp.TokenVisa, false, outbox.InstallmentPaid},
		{"declined", psp.TokenDeclined, false, outbox.InstallmentDeclined},
		{"refused", psp.TokenVisa, true, outbox.InstallmentNeedsAttention},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newInstallmentEnv(t, "UTC", checkouttest.UTC("2027-01-15T09:00:00Z"))
			_, id := e.Plan("k-frozen", 600, 2)
			if err := e.Sandbox.ReplacePaymentMethodCard(ctx, e.Card.ID, tc.token); err != nil {
				t.Fatal(err)
			}
			at := checkouttest.UTC("2027-02-15T00:00:00Z")
			frozen, err := e.c.claimInstallment(ctx, at)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refuse {
				if _, err := e.Sandbox.CancelCharge(ctx, frozen.Key); err != nil {
					t.Fatal(err)
				}
			}
			e.Advance(e.c.cfg.Lease + time.Second)
			taker, err := e.c.claimInstallment(ctx, at)
			if err != nil {
				t.Fatalf("take over after the lease: %v", err)
			}
			before := e.eventCounts()
			var res Result
			if err := e.c.chargeInstallment(ctx, frozen, at, &res); err != nil {
				t.Fatal(err)
			}
			if res != (Result{Fenced: 1}) {
				t.Errorf("the woken run recorded %+v, want only fenced", res)
			}
			if got := e.eventCounts(); !maps.Equal(got, before) {
				t.Errorf("the fenced run wrote events: %v, before %v", got, before)
			}
			if err := e.c.chargeInstallment(ctx, taker, at, &res); err != nil {
				t.Fatal(err)
			}
			want := maps.Clone(before)
			want[tc.want]++
			if got := e.eventCounts(); !maps.Equal(got, want) {
				t.Errorf("after the taker's record: events %v, want %v", got, want)
			}
			if n := e.Count(`SELECT count(*) FROM outbox_events WHERE order_id = $1 AND type = $2
				 AND payload->'installment'->>'attempts' = '1'`, id, tc.want); n != 1 {
				t.Errorf("%d %s events of attempt 1, want 1", n, tc.want)
			}
		})
	}
}

// TestAnInstallmentEventThatCannotBeWrittenUndoesItsOutcome: when the event cannot be
// written (outbox_events refuses every write), the charge is not recorded either: the
// installment stays in flight and the order's capture does not grow. The run after the lease
// lapses looks the charge up and records it, with its one event.
func TestAnInstallmentEventThatCannotBeWrittenUndoesItsOutcome(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "UTC", checkouttest.UTC("2027-01-15T09:00:00Z"))
	_, id := e.Plan("k-nowrite", 600, 2)
	e.failWrites("outbox_events")
	if _, err := e.c.run(context.Background(), checkouttest.UTC("2027-02-15T00:00:00Z")); err == nil {
		t.Fatal("the run recorded its charge without its event")
	}
	e.allowWrites("outbox_events")
	if got := e.Text(`SELECT status || ' ' || in_flight FROM installments WHERE order_id = $1 AND n = 2`, id); got != "scheduled true" {
		t.Errorf("installment 2 is %s, want still scheduled and in flight", got)
	}
	if got := e.Count(`SELECT captured_amount FROM orders WHERE id = $1`, id); got != 300 {
		t.Errorf("captured %d, want only the first installment's 300", got)
	}
	e.Advance(e.c.cfg.Lease + time.Second)
	if res := e.run("2027-02-15T00:00:00Z"); res.Charged != 1 {
		t.Errorf("the rerun: %+v, want the charge recorded", res)
	}
	if n := e.Count(`SELECT count(*) FROM outbox_events WHERE order_id = $1 AND type = $2`, id, outbox.InstallmentPaid); n != 1 {
		t.Errorf("%d installment.paid events, want 1", n)
	}
	e.ledgerAgrees(id)
}
