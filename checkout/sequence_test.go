package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
)

// sequenced is what a receiver reads of an event's body to order it: docs/webhooks-out.md,
// "Ordering".
type sequenced struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Order          string `json:"order"`
		Status         string `json:"status"`
		Refund         string `json:"refund"`
		Sequence       *int64 `json:"sequence"`
		RefundedAmount *int64 `json:"refunded_amount"`
	} `json:"data"`
}

// clientEvents returns the bodies of the client's events, as every channel sends them.
func (e *actionEnv) clientEvents() [][]byte {
	e.t.Helper()
	var ids []string
	if err := e.db.Select(&ids, `SELECT id FROM outbox_events WHERE client_id = $1`, e.client.ID); err != nil {
		e.t.Fatal(err)
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		ev, err := outbox.Get(context.Background(), e.db, id)
		if err != nil {
			e.t.Fatal(err)
		}
		if out[i], err = ev.Body(); err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}

// byOrder parses bodies and returns each order's events by sequence; it fails the test on
// an event without one.
func byOrder(t *testing.T, bodies [][]byte) map[string][]sequenced {
	t.Helper()
	out := map[string][]sequenced{}
	for _, b := range bodies {
		var ev sequenced
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Data.Sequence == nil {
			t.Errorf("%s has no sequence: %s", ev.Type, b)
			continue
		}
		out[ev.Data.Order] = append(out[ev.Data.Order], ev)
	}
	for _, evs := range out {
		slices.SortFunc(evs, func(a, b sequenced) int { return int(*a.Data.Sequence - *b.Data.Sequence) })
	}
	return out
}

// checkOneToN fails the test unless each order's events are numbered 1 to n, once each.
func checkOneToN(t *testing.T, orders map[string][]sequenced) {
	t.Helper()
	for order, evs := range orders {
		for i, ev := range evs {
			if *ev.Data.Sequence != int64(i+1) {
				t.Errorf("order %s: its event %d by sequence (%s) has sequence %d, want %d", order, i+1, ev.Type, *ev.Data.Sequence, i+1)
			}
		}
	}
}

// receiver applies events as docs/webhooks-out.md ("Ordering") tells a merchant to: it
// keeps, per order, the highest sequence of an event that carries the order's status
// (every type but refund.created, whose status is the refund's) and of one that carries
// its refunded total (order.refunded), and lets no older event overwrite what a newer one
// said. Duplicates (the same webhook-id) are ignored.
type receiver struct {
	applied map[string]bool
	orders  map[string]*receivedOrder
}

type receivedOrder struct {
	status                 string
	statusSeq, refundedSeq int64
	refunded               int64
}

func (r *receiver) receive(t *testing.T, body []byte) {
	t.Helper()
	var ev sequenced
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	if r.applied[ev.ID] {
		return
	}
	r.applied[ev.ID] = true
	o := r.orders[ev.Data.Order]
	if o == nil {
		o = &receivedOrder{}
		r.orders[ev.Data.Order] = o
	}
	seq := *ev.Data.Sequence
	if ev.Type != outbox.RefundCreated && seq > o.statusSeq {
		o.status, o.statusSeq = ev.Data.Status, seq
	}
	if ev.Data.RefundedAmount != nil && seq > o.refundedSeq {
		o.refunded, o.refundedSeq = *ev.Data.RefundedAmount, seq
	}
}

// TestEveryEventCarriesItsOrdersSequence drives one client through a flow that writes every
// event type tekrar has (outbox.Types, the documented list: a type added without a step
// here fails): payments paid and declined, two refunds and a dispute of one order, an
// installment paid, declined on its due day and each retry and handed to an operator, a
// payment handed to an operator, one canceled with a refund owed. Every event's body
// carries its order's sequence, each order's events are numbered 1 to n in the order the
// flow made its changes, and a receiver that gets them all in a shuffled order (twenty
// shuffles), some twice, and follows the documented rule ends with each order's status and refunded total as
// Postgres has them.
func TestEveryEventCarriesItsOrdersSequence(t *testing.T) {
	ctx := context.Background()
	e := newInstallmentEnv(t, "UTC", utc("2027-01-10T09:00:00Z"))
	sandbox := psp.NewSandbox(e.db, psp.SandboxOptions{Webhooks: &psp.WebhookOptions{URL: "http://127.0.0.1:1/unused"}})
	e.p.Provider = sandbox
	completer := newCompleter(e.s, CompleterConfig{Grace: time.Minute, AttentionAfter: time.Hour, Batch: 100})
	pass := func() {
		t.Helper()
		if _, err := completer.Pass(ctx); err != nil {
			t.Fatalf("completer: %v", err)
		}
	}
	want := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %d, want %d", what, got, want)
		}
	}

	planned, _ := e.plan("k-plan", 900, 3) // due Feb 10 and Mar 10
	paid, st := e.order("k-paid", psp.TokenVisa, 5000)
	want("pay", st, http.StatusCreated)
	_, st = e.order("k-declined", psp.TokenDeclined, 5000)
	want("decline", st, http.StatusPaymentRequired)
	want("first refund", e.refund("k-refund-1", paid, 1000), http.StatusCreated)
	want("second refund", e.refund("k-refund-2", paid, 500), http.StatusCreated)
	charge := e.str(`SELECT p.provider_charge_id FROM payments p JOIN orders o ON o.id = p.order_id WHERE o.public_id = $1`, paid)
	if _, err := sandbox.OpenDispute(ctx, charge, 2000, "fraudulent"); err != nil {
		t.Fatal(err)
	}
	e.deliverChargeEvent(paid)
	e.run("2027-02-10T00:00:00Z") // the plan's second installment, paid
	if err := e.sandbox.ReplacePaymentMethodCard(ctx, e.pm.ID, psp.TokenDeclined); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"2027-03-10", "2027-03-11", "2027-03-13", "2027-03-17"} { // due, then retries
		e.run(at + "T00:00:00Z")
	}
	e.p.set("down")
	unknown, st := e.order("k-unknown", psp.TokenVisa, 5000)
	want("provider down", st, http.StatusServiceUnavailable)
	e.advance(2 * time.Minute)
	pass()
	e.advance(time.Hour)
	pass() // handed to an operator
	abandoned, st := e.order("k-abandoned", psp.TokenVisa, 5000)
	want("provider down", st, http.StatusServiceUnavailable)
	e.p.Provider = psp.NewSandbox(e.db, psp.SandboxOptions{NoCancel: true})
	e.p.set("")
	e.advance(2 * time.Minute)
	pass() // canceled, a refund owed

	bodies := e.clientEvents()
	orders := byOrder(t, bodies)
	var types []string
	for _, evs := range orders {
		for _, ev := range evs {
			if !slices.Contains(types, ev.Type) {
				types = append(types, ev.Type)
			}
		}
	}
	for _, typ := range outbox.Types {
		if !slices.Contains(types, typ) {
			t.Errorf("the flow wrote no %s event: give the type a step, and check its data has the sequence", typ)
		}
	}
	checkOneToN(t, orders)
	flow := map[string][]string{
		planned: {outbox.OrderPaid, outbox.InstallmentPaid, outbox.InstallmentDeclined, outbox.InstallmentDeclined,
			outbox.InstallmentDeclined, outbox.InstallmentNeedsAttention},
		paid: {outbox.OrderPaid, outbox.RefundCreated, outbox.OrderRefunded, outbox.RefundCreated, outbox.OrderRefunded,
			outbox.OrderDisputed},
		unknown:   {outbox.OrderNeedsAttention},
		abandoned: {outbox.CompensationCreated},
	}
	for order, wantTypes := range flow {
		var got []string
		for _, ev := range orders[order] {
			got = append(got, ev.Type)
		}
		if !slices.Equal(got, wantTypes) {
			t.Errorf("order %s's events by sequence: %v, want %v", order, got, wantTypes)
		}
	}

	// Out of order, some twice: twenty shuffles of the stream.
	seed := time.Now().UnixNano()
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	for round := range 20 {
		stream := append(slices.Clone(bodies), bodies[:len(bodies)/3]...)
		rnd.Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })
		r := &receiver{applied: map[string]bool{}, orders: map[string]*receivedOrder{}}
		for _, b := range stream {
			r.receive(t, b)
		}
		for order, o := range r.orders {
			var status string
			var refunded int64
			if err := e.db.QueryRow(`SELECT status, refunded_amount FROM orders WHERE public_id = $1`, order).Scan(&status, &refunded); err != nil {
				t.Fatal(err)
			}
			if o.status != status {
				t.Errorf("seed %d, round %d: the receiver holds order %s %s, Postgres %s", seed, round, order, o.status, status)
			}
			if o.refundedSeq > 0 && o.refunded != refunded {
				t.Errorf("seed %d, round %d: the receiver holds order %s refunded %d, Postgres %d", seed, round, order, o.refunded, refunded)
			}
		}
		if len(r.orders) != len(flow)+1 { // and the declined order
			t.Errorf("the receiver heard of %d orders, want %d", len(r.orders), len(flow)+1)
		}
	}
}

// TestConcurrentRefundsNumberTheirEventsInOrder: refunds of two orders at once, each under
// its own key. Each order's events are numbered 1 to n once each, whatever the other order
// does, and each refund's refund.created comes before its order.refunded.
func TestConcurrentRefundsNumberTheirEventsInOrder(t *testing.T) {
	t.Parallel()
	e := newActionEnv(t)
	const refunds = 8
	var orders []string
	for i := range 2 {
		o, st := e.order(fmt.Sprintf("k-pay-%d", i), psp.TokenVisa, 100*refunds)
		if st != http.StatusCreated {
			t.Fatalf("pay: %d", st)
		}
		orders = append(orders, o)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 * refunds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			order := orders[i%2]
			in := RefundInput{Amount: 100}
			body, _ := json.Marshal(in)
			res, err := e.s.CreateRefund(context.Background(), Request{Client: e.client, Key: fmt.Sprintf("k-refund-%d", i), Method: "POST",
				Path: "/v1/orders/" + order + "/refunds", Body: body}, Lookup{}, order, in)
			if err != nil || res.Status != http.StatusCreated {
				t.Errorf("refund %d of %s: %d %s %v", i, order, res.Status, res.Body, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	byOrder := byOrder(t, e.clientEvents())
	checkOneToN(t, byOrder)
	for _, order := range orders {
		evs := byOrder[order]
		if len(evs) != 1+2*refunds {
			t.Errorf("order %s has %d events, want %d", order, len(evs), 1+2*refunds)
		}
		created := map[string]int64{}
		for _, ev := range evs {
			switch ev.Type {
			case outbox.RefundCreated:
				created[ev.Data.Refund] = *ev.Data.Sequence
			case outbox.OrderRefunded:
				if n, ok := created[ev.Data.Refund]; !ok || n >= *ev.Data.Sequence {
					t.Errorf("order %s: order.refunded %d of refund %s, its refund.created %d (%v)", order, *ev.Data.Sequence, ev.Data.Refund, n, ok)
				}
			}
		}
	}
}
