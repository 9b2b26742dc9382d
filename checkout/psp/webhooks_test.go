package psp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// receiver is a merchant's endpoint: it verifies every delivery and records the events it
// accepted, in arrival order; the first failFirst deliveries are answered 500.
type receiver struct {
	t         *testing.T
	verifier  stdwebhook.Verifier
	mu        sync.Mutex
	failFirst int
	posts     int
	bad       int
	got       []Event
}

func newReceiver(t *testing.T, secret string, failFirst int) (*receiver, string) {
	t.Helper()
	k, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, verifier: stdwebhook.Verifier{Keys: []stdwebhook.Key{k}}, failFirst: failFirst}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.posts++
		m, err := r.verifier.Verify(req.Header, body)
		if err != nil {
			r.bad++
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.posts <= r.failFirst {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		var e Event
		if err := json.Unmarshal(body, &e); err != nil || e.ID != m.ID {
			r.bad++
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.got = append(r.got, e)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *receiver) events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.got...)
}

// A charge's life writes one event per change, numbered in order, each in the transaction
// of its change: made, refunded in two parts (the second completes it), disputed, decided.
func TestEveryChangeWritesItsEvent(t *testing.T) {
	secret := stdwebhook.NewSecret()
	sb := newSandbox(t, SandboxOptions{Webhooks: &WebhookOptions{URL: "http://127.0.0.1:1/unused", Secret: secret}})
	ctx := testContext(t)
	c := mustCharge(t, sb, ChargeRequest{Key: "life-1", Amount: 9000, Currency: "TRY", CardToken: TokenVisa})
	mustCharge(t, sb, ChargeRequest{Key: "life-1", Amount: 9000, Currency: "TRY", CardToken: TokenVisa}) // a repeat changes nothing
	declined := mustCharge(t, sb, ChargeRequest{Key: "life-2", Amount: 100, Currency: "TRY", CardToken: TokenDeclined})
	if _, err := sb.Refund(ctx, RefundRequest{Key: "r-1", ChargeID: c.ID, Amount: 4000}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.DashboardRefund(ctx, c.ID, 5000, "customer called"); err != nil {
		t.Fatal(err)
	}
	d, err := sb.OpenDispute(ctx, c.ID, 9000, "fraudulent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.CloseDispute(ctx, d.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.CloseDispute(ctx, d.ID, false); err == nil {
		t.Error("a closed dispute was closed again")
	}
	var rows []struct {
		Type string `db:"type"`
		Seq  int    `db:"seq"`
		Body string `db:"body"`
	}
	if err := sb.db.Select(&rows, `SELECT type, seq, body FROM psp_events WHERE charge_id = $1 ORDER BY seq`, c.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{EventChargeSucceeded, EventRefundSucceeded, EventRefundSucceeded, EventChargeRefunded, EventDisputeCreated, EventDisputeClosed}
	if len(rows) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(rows), len(want), rows)
	}
	for i, r := range rows {
		var e Event
		if err := json.Unmarshal([]byte(r.Body), &e); err != nil {
			t.Fatal(err)
		}
		if r.Type != want[i] || r.Seq != i+1 || e.Data.Sequence != i+1 || e.Type != want[i] || e.Data.ChargeKey != "life-1" {
			t.Errorf("event %d: %s seq %d (body %s %d), want %s seq %d", i, r.Type, r.Seq, e.Type, e.Data.Sequence, want[i], i+1)
		}
	}
	var last Event
	_ = json.Unmarshal([]byte(rows[5].Body), &last)
	if last.Data.RefundedAmount != 9000 || last.Data.Dispute == nil || last.Data.Dispute.Status != DisputeWon {
		t.Errorf("the last event does not carry the charge's state: %+v", last.Data)
	}
	var failed string
	if err := sb.db.Get(&failed, `SELECT type FROM psp_events WHERE charge_id = $1`, declined.ID); err != nil || failed != EventChargeFailed {
		t.Errorf("declined charge's event: %q, %v", failed, err)
	}
}

// Without webhooks configured, the ledger writes no events: the charge statement is the one
// the first-arrival benchmark measures.
func TestNoWebhooksNoEvents(t *testing.T) {
	sb := newSandbox(t, SandboxOptions{})
	c := mustCharge(t, sb, ChargeRequest{Key: "quiet", Amount: 100, Currency: "TRY", CardToken: TokenVisa})
	if _, err := sb.Refund(testContext(t), RefundRequest{Key: "quiet-r", ChargeID: c.ID, Amount: 100}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := sb.db.Get(&n, `SELECT count(*) FROM psp_events`); err != nil || n != 0 {
		t.Fatalf("%d events, %v", n, err)
	}
}

// The sender delivers every event, signed, through failures: the receiver's first answers
// are 500s; every event arrives, and with Duplicate 1 each acknowledged event comes twice.
// Concurrent charges under one key make one charge and one event.
func TestWebhooksAreDeliveredThroughFailures(t *testing.T) {
	secret := stdwebhook.NewSecret()
	r, url := newReceiver(t, secret, 5)
	sb := newSandbox(t, SandboxOptions{Now: time.Now, Webhooks: &WebhookOptions{URL: url, Secret: secret,
		Duplicate: 1, MaxBackoff: 50 * time.Millisecond}})
	ctx := testContext(t)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			_, _ = sb.Charge(ctx, ChargeRequest{Key: "same", Amount: 500, Currency: "TRY", CardToken: TokenVisa})
		})
		wg.Go(func() {
			_, _ = sb.Charge(ctx, ChargeRequest{Key: "k-" + string(rune('a'+i)), Amount: 500, Currency: "TRY", CardToken: TokenVisa})
		})
	}
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := sb.DeliverWebhooks(ctx); err != nil {
			t.Fatal(err)
		}
		var left int
		if err := sb.db.Get(&left, `SELECT count(*) FROM psp_events WHERE delivered_at IS NULL`); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events still undelivered", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := map[string]int{}
	for _, e := range r.events() {
		seen[e.ID]++
	}
	if len(seen) != 11 {
		t.Fatalf("%d distinct events received, want 11 (one per charge)", len(seen))
	}
	for id, n := range seen {
		if n != 2 {
			t.Errorf("event %s received %d times, want 2 (Duplicate is 1)", id, n)
		}
	}
	st := sb.WebhookStats()
	if st.Delivered != 11 || st.Duplicates != 11 || st.Failed < 5 || r.bad != 0 {
		t.Errorf("stats %+v, bad signatures %d", st, r.bad)
	}
}

// Events held back still arrive, each once; a tok_timeout charge whose caller never heard
// back is announced all the same.
func TestDelayedEventsStillArrive(t *testing.T) {
	secret := stdwebhook.NewSecret()
	r, url := newReceiver(t, secret, 0)
	sb := newSandbox(t, SandboxOptions{Now: time.Now, Webhooks: &WebhookOptions{URL: url, Secret: secret,
		Delay: 1, DelayFor: 300 * time.Millisecond}})
	ctx := testContext(t)
	c := mustCharge(t, sb, ChargeRequest{Key: "late", Amount: 700, Currency: "TRY", CardToken: TokenVisa})
	if _, err := sb.DeliverWebhooks(ctx); err != nil { // holds charge.succeeded back
		t.Fatal(err)
	}
	if _, err := sb.Refund(ctx, RefundRequest{Key: "late-r", ChargeID: c.ID, Amount: 700}); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, _ = sb.Charge(tctx, ChargeRequest{Key: "timeout", Amount: 800, Currency: "TRY", CardToken: TokenTimeout})
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.events()) < 4 && time.Now().Before(deadline) {
		if _, err := sb.DeliverWebhooks(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := r.events()
	if len(got) != 4 {
		t.Fatalf("%d events, want 4: %+v", len(got), got)
	}
	if sb.WebhookStats().Delayed != 4 {
		t.Errorf("delayed %d, want 4", sb.WebhookStats().Delayed)
	}
	var timeoutAnnounced bool
	for _, e := range got {
		if e.Data.ChargeKey == "timeout" && e.Type == EventChargeSucceeded {
			timeoutAnnounced = true
		}
	}
	if !timeoutAnnounced {
		t.Error("the tok_timeout charge was not announced")
	}
}

// The dashboard's actions over HTTP, as `tekrar psp` serves them to tests and demos: a refund
// outside tekrar, a dispute opened and decided; each answers the record it made and writes
// its event. Wrong input is a 400 problem and changes nothing.
func TestDashboardOverHTTP(t *testing.T) {
	sb := newSandbox(t, SandboxOptions{Webhooks: &WebhookOptions{URL: "http://127.0.0.1:1/unused", Secret: stdwebhook.NewSecret()}})
	srv := httptest.NewServer(NewHandler(sb, discardLogger()))
	t.Cleanup(srv.Close)
	c := mustCharge(t, sb, ChargeRequest{Key: "dash", Amount: 3000, Currency: "EUR", CardToken: TokenVisa})
	post := func(path, body string, out any) int {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode == 200 {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var rf Refund
	if s := post("/dashboard/charges/"+c.ID+"/refunds", `{"amount":1000,"reason":"goodwill"}`, &rf); s != 200 || rf.Amount != 1000 || rf.ChargeID != c.ID {
		t.Fatalf("dashboard refund: %d %+v", s, rf)
	}
	var d Dispute
	if s := post("/dashboard/charges/"+c.ID+"/disputes", `{"amount":2000,"reason":"not received"}`, &d); s != 200 || d.Status != DisputeOpen {
		t.Fatalf("open dispute: %d %+v", s, d)
	}
	if s := post("/dashboard/disputes/"+d.ID+"/close", `{"won":false}`, &d); s != 200 || d.Status != DisputeLost || d.Closed == nil {
		t.Fatalf("close dispute: %d %+v", s, d)
	}
	for _, bad := range []struct{ path, body string }{
		{"/dashboard/charges/" + c.ID + "/refunds", `{"amount":5000}`},     // more than is left
		{"/dashboard/charges/" + c.ID + "/disputes", `{"amount":-1}`},      // not an amount
		{"/dashboard/charges/ch_nobody/disputes", `{"amount":1}`},          // no such charge
		{"/dashboard/disputes/" + d.ID + "/close", `{"won":true}`},         // closed already
		{"/dashboard/charges/" + c.ID + "/disputes", `{"amount":1,"x":1}`}, // unknown member
	} {
		if s := post(bad.path, bad.body, nil); s < 400 || s > 499 {
			t.Errorf("POST %s %s: %d, want a 4xx", bad.path, bad.body, s)
		}
	}
	var types []string
	if err := sb.db.Select(&types, `SELECT type FROM psp_events WHERE charge_id = $1 ORDER BY seq`, c.ID); err != nil {
		t.Fatal(err)
	}
	if want := []string{EventChargeSucceeded, EventRefundSucceeded, EventDisputeCreated, EventDisputeClosed}; !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}
