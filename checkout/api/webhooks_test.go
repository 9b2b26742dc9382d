package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// inboxEnv is tekrar with its provider inbox on, and the provider's signing key.
func inboxEnv(t *testing.T) (*apptest.Env, stdwebhook.Key) {
	t.Helper()
	secret := stdwebhook.NewSecret()
	e := apptest.New(t, func(c *config.Server) {
		c.PSPWebhookSecrets = secret
		c.ProviderTimeout = 300 * time.Millisecond // tok_timeout answers within it
	})
	k, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return e, k
}

// event is the body of a provider event of charge ch at seq, in the sandbox's shape.
func event(t *testing.T, id, typ, ch string, seq int, refunded int64) []byte {
	t.Helper()
	b, err := json.Marshal(psp.Event{ID: id, Type: typ, Created: time.Now().UTC(), Data: psp.EventData{
		ChargeID: ch, ChargeKey: "tekrar_ch_" + ch, Sequence: seq, Amount: 9000, Currency: "TRY",
		Status: psp.StatusSucceeded, RefundedAmount: refunded}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deliver posts body to the inbox with headers h (as application/json unless h says
// otherwise); h nil signs it now with k.
func deliver(e *apptest.Env, k stdwebhook.Key, id string, body []byte, h http.Header) (int, string, error) {
	if h == nil {
		h = stdwebhook.Headers(id, time.Now(), body, k)
	}
	req, err := http.NewRequest("POST", e.URL+"/webhooks/psp", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header = h
	if h.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Outcome string `json:"outcome"`
		Code    string `json:"code"`
	}
	_ = json.Unmarshal(b, &out)
	if out.Code != "" {
		return resp.StatusCode, out.Code, nil
	}
	return resp.StatusCode, out.Outcome, nil
}

// Forged, stale and altered deliveries are refused with 400 and store nothing; the genuine
// one is accepted.
func TestProviderWebhookSignatures(t *testing.T) {
	e, k := inboxEnv(t)
	body := event(t, "evt_sig", psp.EventChargeSucceeded, "ch_sig", 1, 0)
	other, _ := stdwebhook.ParseSecret(stdwebhook.NewSecret())
	cases := []struct {
		name string
		h    http.Header
		body []byte
	}{
		{"forged: another key", stdwebhook.Headers("evt_sig", time.Now(), body, other), body},
		{"stale: six minutes old", stdwebhook.Headers("evt_sig", time.Now().Add(-6*time.Minute), body, k), body},
		{"from the future", stdwebhook.Headers("evt_sig", time.Now().Add(6*time.Minute), body, k), body},
		{"body changed after signing", stdwebhook.Headers("evt_sig", time.Now(), body, k), bytes.Replace(body, []byte("9000"), []byte("9001"), 1)},
		{"replayed under another id", stdwebhook.Headers("evt_other", time.Now(), body, k), body},
		{"no signature", http.Header{}, body},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, code, err := deliver(e, k, "", c.body, c.h)
			if err != nil || status != 400 || code != "webhook_signature_invalid" {
				t.Fatalf("%d %s %v, want 400 webhook_signature_invalid", status, code, err)
			}
		})
	}
	if n := count(t, e, `SELECT count(*) FROM provider_events`) + count(t, e, `SELECT count(*) FROM provider_charges`); n != 0 {
		t.Fatalf("refused deliveries stored %d rows", n)
	}
	if status, outcome, err := deliver(e, k, "evt_sig", body, nil); err != nil || status != 200 || outcome != "applied" {
		t.Fatalf("the genuine delivery: %d %s %v", status, outcome, err)
	}
	// An event type tekrar does not know is stored and acknowledged, not refused.
	if status, outcome, _ := deliver(e, k, "evt_new", event(t, "evt_new", "charge.captured_in_2030", "ch_sig", 2, 0), nil); status != 200 || outcome != "ignored" {
		t.Fatalf("unknown type: %d %s", status, outcome)
	}
	if n := count(t, e, `SELECT last_sequence FROM provider_charges WHERE charge_id = 'ch_sig'`); n != 1 {
		t.Errorf("an unknown type moved the charge to sequence %d", n)
	}
}

// The same event delivered 50 times at once is recorded once and applied once; every
// delivery is acknowledged with 200 and counted.
func TestProviderWebhookDeliveredFiftyTimesAtOnce(t *testing.T) {
	e, k := inboxEnv(t)
	body := event(t, "evt_storm", psp.EventRefundSucceeded, "ch_storm", 3, 4000)
	const n = 50
	outcomes := make([]string, n)
	statuses := make([]int, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			statuses[i], outcomes[i], _ = deliver(e, k, "evt_storm", body, nil)
		})
	}
	close(start)
	wg.Wait()
	got := map[string]int{}
	for i := range n {
		if statuses[i] != 200 {
			t.Errorf("delivery %d: %d %s", i, statuses[i], outcomes[i])
		}
		got[outcomes[i]]++
	}
	if got["applied"] != 1 || got["duplicate"] != n-1 {
		t.Errorf("outcomes %v, want 1 applied and %d duplicates", got, n-1)
	}
	if c := count(t, e, `SELECT deliveries FROM provider_events WHERE event_id = 'evt_storm'`); c != n {
		t.Errorf("deliveries counted %d, want %d", c, n)
	}
	if c := count(t, e, `SELECT count(*) FROM provider_events`); c != 1 {
		t.Errorf("%d events stored, want 1", c)
	}
}

// The events of one charge, delivered in every order, leave the charge in the state of its
// newest event; each older event that arrives after a newer one is stale and changes
// nothing.
func TestProviderWebhooksInEveryOrder(t *testing.T) {
	e, k := inboxEnv(t)
	types := []string{psp.EventChargeSucceeded, psp.EventRefundSucceeded, psp.EventRefundSucceeded, psp.EventChargeRefunded}
	refunded := []int64{0, 4000, 9000, 9000}
	var perms [][]int
	var permute func(p []int, k int)
	permute = func(p []int, k int) {
		if k == len(p) {
			perms = append(perms, append([]int(nil), p...))
			return
		}
		for i := k; i < len(p); i++ {
			p[k], p[i] = p[i], p[k]
			permute(p, k+1)
			p[k], p[i] = p[i], p[k]
		}
	}
	permute([]int{0, 1, 2, 3}, 0)
	for n, perm := range perms {
		ch := fmt.Sprintf("ch_perm%d", n)
		stale := 0
		newest := 0
		for _, i := range perm {
			id := fmt.Sprintf("evt_%s_%d", ch, i+1)
			status, outcome, err := deliver(e, k, id, event(t, id, types[i], ch, i+1, refunded[i]), nil)
			if err != nil || status != 200 {
				t.Fatalf("%v: %d %v", perm, status, err)
			}
			want := "applied"
			if i+1 < newest {
				want = "stale"
				stale++
			} else {
				newest = i + 1
			}
			if outcome != want {
				t.Errorf("order %v, event %d: %s, want %s", perm, i+1, outcome, want)
			}
		}
		if seq := count(t, e, `SELECT last_sequence FROM provider_charges WHERE charge_id = $1`, ch); seq != 4 {
			t.Errorf("order %v: charge at sequence %d, want 4", perm, seq)
		}
		if r := count(t, e, `SELECT refunded FROM provider_charges WHERE charge_id = $1`, ch); r != 9000 {
			t.Errorf("order %v: refunded %d, want 9000", perm, r)
		}
		if s := count(t, e, `SELECT count(*) FROM provider_events WHERE charge_id = $1 AND outcome = 'stale'`, ch); s != stale {
			t.Errorf("order %v: %d stale, want %d", perm, s, stale)
		}
	}
	if len(perms) != 24 {
		t.Fatalf("%d orders tried, want 24", len(perms))
	}
}

// ledgerEvent is the provider's charge.succeeded (or charge.failed) event for the charge the
// sandbox made for the order of key, built from its ledger as the sandbox builds it.
func ledgerEvent(t *testing.T, e *apptest.Env, key string) (string, []byte) {
	t.Helper()
	var c struct {
		ID          string `db:"id"`
		Key         string `db:"key"`
		Amount      int64  `db:"amount"`
		Currency    string `db:"currency"`
		Status      string `db:"status"`
		Description string `db:"description"`
		Brand       string `db:"card_brand"`
		Last4       string `db:"card_last4"`
	}
	if err := e.DB.Get(&c, `
		SELECT ch.id, ch.key, ch.amount, ch.currency, ch.status, ch.description, ch.card_brand, ch.card_last4
		  FROM psp_charges ch JOIN orders o ON ch.description = 'order ' || o.public_id
		  JOIN idempotency_keys k ON k.order_id = o.id
		 WHERE k.key = $1`, key); err != nil {
		t.Fatalf("the ledger's charge for %s: %v", key, err)
	}
	typ := psp.EventChargeSucceeded
	if c.Status != psp.StatusSucceeded {
		typ = psp.EventChargeFailed
	}
	id := "evt_" + c.ID
	b, err := json.Marshal(psp.Event{ID: id, Type: typ, Created: time.Now().UTC(), Data: psp.EventData{
		ChargeID: c.ID, ChargeKey: c.Key, Description: c.Description, Sequence: 1, Amount: c.Amount,
		Currency: c.Currency, Status: c.Status, CardBrand: c.Brand, CardLast4: c.Last4}})
	if err != nil {
		t.Fatal(err)
	}
	return id, b
}

// A tok_timeout charge: the provider made it but its answer never came, so the client got
// 503 payment_pending. The provider's charge.succeeded settles the order: paid, the key
// completed, and the client's retry replays the paid answer; one charge, one payment.
func TestChargeSucceededWebhookSettlesAPendingPayment(t *testing.T) {
	e, k := inboxEnv(t)
	body := orderBody(9000, "tok_timeout")
	problemOf(t, postOrder(t, e, e.Secret, "k-lost-answer", body), 503, "payment_pending")
	id, ev := ledgerEvent(t, e, "k-lost-answer")
	if status, outcome, err := deliver(e, k, id, ev, nil); err != nil || status != 200 || outcome != "applied" {
		t.Fatalf("webhook: %d %s %v", status, outcome, err)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-lost-answer' AND state = 'completed' AND response_status = 201`); n != 1 {
		t.Fatal("the key was not completed with the paid answer")
	}
	r := postOrder(t, e, e.Secret, "k-lost-answer", body)
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" || decodeOrder(t, r).Status != "paid" {
		t.Fatalf("the retry: %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`); n != 1 {
		t.Errorf("%d charges", n)
	}
	if n := count(t, e, `SELECT count(*) FROM payments`); n != 1 {
		t.Errorf("%d payments", n)
	}
	// Redelivered later, it changes nothing.
	if _, outcome, _ := deliver(e, k, id, ev, nil); outcome != "duplicate" {
		t.Errorf("redelivery: %s", outcome)
	}
}

// The client's retry, the completer and the provider's webhook race for one lost answer:
// whoever wins, the order ends paid once, the key replays paid, and there is one charge and
// one payment.
func TestLostAnswerRaceOfRetryCompleterAndWebhook(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			e, k := inboxEnv(t)
			key := fmt.Sprintf("k-race-%d", round)
			body := orderBody(9000, "tok_timeout")
			problemOf(t, postOrder(t, e, e.Secret, key, body), 503, "payment_pending")
			id, ev := ledgerEvent(t, e, key)
			e.Clock.Advance(10 * time.Minute) // the lease and the completer's grace are over
			var wg sync.WaitGroup
			start := make(chan struct{})
			var retry apptest.Response
			wg.Go(func() {
				<-start
				retry, _ = e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", key, "Prefer", "wait=5")
			})
			wg.Go(func() { <-start; _, _ = e.App.Completer.Pass(t.Context()) })
			wg.Go(func() { <-start; _, _, _ = deliver(e, k, id, ev, nil) })
			close(start)
			wg.Wait()
			if retry.Status != 201 && retry.Status != 409 {
				t.Errorf("the racing retry: %d %s", retry.Status, retry.Body)
			}
			r := postOrder(t, e, e.Secret, key, body)
			if r.Status != 201 || decodeOrder(t, r).Status != "paid" {
				t.Fatalf("after the race: %d %s", r.Status, r.Body)
			}
			if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`); n != 1 {
				t.Errorf("%d charges", n)
			}
			if n := count(t, e, `SELECT count(*) FROM payments`); n != 1 {
				t.Errorf("%d payments", n)
			}
			if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != 1 {
				t.Errorf("%d paid orders", n)
			}
		})
	}
}

// Refunds made at the provider, outside tekrar, appear on the order: its refunded amount
// follows the charge's, recorded as refunds of their own, once however the events arrive;
// tekrar's own refunds are not counted twice.
func TestRefundsAtTheProviderAppearOnTheOrder(t *testing.T) {
	e, k := inboxEnv(t)
	o := decodeOrder(t, postOrder(t, e, e.Secret, "k-paid", orderBody(9000, "tok_visa")))
	if r := e.Do(t, "POST", "/v1/orders/"+o.ID+"/refunds", e.Secret, []byte(`{"amount":1000}`), "Idempotency-Key", "k-own-refund"); r.Status != 201 {
		t.Fatalf("tekrar's own refund: %d %s", r.Status, r.Body)
	}
	_, paid := ledgerEvent(t, e, "k-paid")
	var ev psp.Event
	if err := json.Unmarshal(paid, &ev); err != nil {
		t.Fatal(err)
	}
	at := func(seq int, typ string, refunded int64, rf *psp.Refund) (string, []byte) {
		ev.ID, ev.Type, ev.Data.Sequence, ev.Data.RefundedAmount, ev.Data.Refund = fmt.Sprintf("evt_r%d", seq), typ, seq, refunded, rf
		b, _ := json.Marshal(ev)
		return ev.ID, b
	}
	// The provider's events: tekrar's refund (1000), then two from its dashboard (2000, 6000),
	// the first reported by its refund.succeeded, the second only by the charge's total.
	ownID, own := at(2, psp.EventRefundSucceeded, 1000, nil)
	dashID, dash := at(3, psp.EventRefundSucceeded, 3000, &psp.Refund{ID: "re_dashboard", ChargeID: ev.Data.ChargeID, Amount: 2000,
		Currency: ev.Data.Currency, Status: psp.RefundSucceeded})
	fullID, full := at(4, psp.EventChargeRefunded, 9000, nil)
	for _, d := range []struct {
		id   string
		body []byte
		want int64 // the order's refunded amount afterwards
	}{{dashID, dash, 3000}, {ownID, own, 3000}, {dashID, dash, 3000}, {fullID, full, 9000}, {dashID, dash, 9000}} {
		if status, _, err := deliver(e, k, d.id, d.body, nil); err != nil || status != 200 {
			t.Fatalf("%s: %d %v", d.id, status, err)
		}
		if got := count(t, e, `SELECT refunded_amount FROM orders WHERE public_id = $1`, o.ID); int64(got) != d.want {
			t.Fatalf("after %s: refunded %d, want %d", d.id, got, d.want)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM refunds WHERE reason = 'refunded at the payment provider'`); n != 2 {
		t.Errorf("%d refunds recorded from the provider, want 2 (2000 and 6000)", n)
	}
	// The refund its refund.succeeded named keeps the provider's id, which the console shows;
	// the one known by the charge's total only has none.
	if n := count(t, e, `SELECT count(*) FROM refunds WHERE reason = 'refunded at the payment provider'
		 AND (amount = 2000 AND provider_refund_id = 're_dashboard' OR amount = 6000 AND provider_refund_id IS NULL)`); n != 2 {
		t.Errorf("%d of the provider's refunds with the provider's id as reported, want 2", n)
	}
	if n := count(t, e, `SELECT coalesce(sum(amount), 0) FROM refunds WHERE status = 'succeeded'`); n != 9000 {
		t.Errorf("refunds add up to %d, want 9000", n)
	}
	// One refund.created and one order.refunded per refund: tekrar's own and the two from
	// the dashboard, whatever the order and repetition of the provider's events.
	for _, typ := range []string{"refund.created", "order.refunded"} {
		if n := count(t, e, `SELECT count(*) FROM outbox_events WHERE type = $1`, typ); n != 3 {
			t.Errorf("%d %s events, want 3", n, typ)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM outbox_events WHERE type = 'order.refunded' AND payload->>'status' = 'refunded'
		 AND (payload->>'refunded_amount')::bigint = 9000 AND (payload->>'refund_amount')::bigint = 6000`); n != 1 {
		t.Error("the last refund's order.refunded does not say the order is refunded in full")
	}
	g := e.Do(t, "GET", "/v1/orders/"+o.ID, e.Secret, nil)
	if !bytes.Contains(g.Body, []byte(`"status":"refunded"`)) {
		t.Errorf("the order: %s", g.Body)
	}
}

// A dispute opened at the provider marks the order disputed (nobody can refund it meanwhile)
// and records the dispute; once decided, the order is paid again and refundable, and the
// dispute keeps its outcome. Repeated events change nothing.
func TestDisputeMarksTheOrderUntilDecided(t *testing.T) {
	e, k := inboxEnv(t)
	o := decodeOrder(t, postOrder(t, e, e.Secret, "k-disputed", orderBody(9000, "tok_visa")))
	_, paid := ledgerEvent(t, e, "k-disputed")
	var ev psp.Event
	if err := json.Unmarshal(paid, &ev); err != nil {
		t.Fatal(err)
	}
	dispute := &psp.Dispute{ID: "dp_1", ChargeID: ev.Data.ChargeID, Amount: 9000, Reason: "fraudulent",
		Status: psp.DisputeOpen, Created: time.Now().UTC()}
	at := func(seq int, typ string) (string, []byte) {
		d := *dispute
		ev.ID, ev.Type, ev.Data.Sequence, ev.Data.Dispute = fmt.Sprintf("evt_d%d", seq), typ, seq, &d
		b, _ := json.Marshal(ev)
		return ev.ID, b
	}
	status := func() string {
		var s string
		if err := e.DB.Get(&s, `SELECT status FROM orders WHERE public_id = $1`, o.ID); err != nil {
			t.Fatal(err)
		}
		return s
	}
	openedID, opened := at(2, psp.EventDisputeCreated)
	for range 2 {
		if st, _, err := deliver(e, k, openedID, opened, nil); err != nil || st != 200 {
			t.Fatalf("dispute.created: %d %v", st, err)
		}
	}
	if s := status(); s != "disputed" {
		t.Fatalf("order %s, want disputed", s)
	}
	if n := count(t, e, `SELECT count(*) FROM order_disputes WHERE dispute_id = 'dp_1' AND status = 'open' AND amount = 9000 AND reason = 'fraudulent'`); n != 1 {
		t.Fatal("the dispute is not recorded")
	}
	problemOf(t, e.Do(t, "POST", "/v1/orders/"+o.ID+"/refunds", e.Secret, []byte(`{"amount":100}`), "Idempotency-Key", "k-during"), 409, "order_not_refundable")
	if g := e.Do(t, "GET", "/v1/orders/"+o.ID, e.Secret, nil); !bytes.Contains(g.Body, []byte(`"status":"disputed"`)) {
		t.Errorf("GET the order: %s", g.Body)
	}

	// A newer event about the same open dispute (the provider says it again under another
	// event id) is applied, and is no new dispute.
	againID, again := at(3, psp.EventDisputeCreated)
	if st, _, err := deliver(e, k, againID, again, nil); err != nil || st != 200 {
		t.Fatalf("dispute.created again: %d %v", st, err)
	}
	now := time.Now().UTC()
	dispute.Status, dispute.Closed = psp.DisputeWon, &now
	closedID, closed := at(4, psp.EventDisputeClosed)
	if st, _, err := deliver(e, k, closedID, closed, nil); err != nil || st != 200 {
		t.Fatalf("dispute.closed: %d %v", st, err)
	}
	if s := status(); s != "paid" {
		t.Fatalf("after the dispute was won: %s, want paid", s)
	}
	// The opening event arriving again, late, moves nothing back.
	if _, outcome, _ := deliver(e, k, openedID, opened, nil); outcome != "duplicate" {
		t.Errorf("late dispute.created: %s", outcome)
	}
	if s := status(); s != "paid" {
		t.Fatalf("a late event moved the order back to %s", s)
	}
	if n := count(t, e, `SELECT count(*) FROM order_disputes WHERE status = 'won' AND closed_at IS NOT NULL`); n != 1 {
		t.Error("the dispute's outcome is not recorded")
	}
	// One order.disputed, written when the dispute was first recorded open: not again for
	// the redelivery, the decision or the late duplicate.
	if n := count(t, e, `SELECT count(*) FROM outbox_events WHERE type = 'order.disputed'
		 AND payload->>'order' = $1 AND payload->'dispute'->>'id' = 'dp_1' AND payload->>'status' = 'disputed'`, o.ID); n != 1 {
		t.Errorf("%d order.disputed events, want 1", n)
	}
	if n := count(t, e, `SELECT count(*) FROM outbox_events WHERE type = 'order.disputed'`); n != 1 {
		t.Errorf("%d order.disputed events in all, want 1", n)
	}
	if r := e.Do(t, "POST", "/v1/orders/"+o.ID+"/refunds", e.Secret, []byte(`{"amount":100}`), "Idempotency-Key", "k-after"); r.Status != 201 {
		t.Errorf("a refund after the dispute: %d %s", r.Status, r.Body)
	}
}
