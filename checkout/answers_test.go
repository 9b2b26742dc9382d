package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
	"github.com/tekrar/tekrar/internal/problem"
)

// answeringProvider is the sandbox with the answer of each operation forced
// (psptest.Answering), under the short names the package's tests use; its operations are
// named as the tables name them (TestAnsweringNamesTheTables).
type answeringProvider struct{ *psptest.Answering }

func (p *answeringProvider) force(op string, err error) { p.Force(op, err) }

// TestAnsweringNamesTheTables: the operations psptest.Answering forces are the tables'.
func TestAnsweringNamesTheTables(t *testing.T) {
	ops := []string{psptest.OpCharge, psptest.OpRefund, psptest.OpLookupCharge, psptest.OpLookupRefund,
		psptest.OpCancelCharge, psptest.OpListCharges, psptest.OpCardFingerprint}
	for _, op := range ops {
		if psp.AnswerTable(op) == nil {
			t.Errorf("psptest forces %q, which no table names", op)
		}
	}
	if n := len(psp.AnswerOps()); len(ops) != n {
		t.Errorf("psptest forces %d operations, the tables name %d", len(ops), n)
	}
}

// answerEnv is an actionEnv whose provider answers as told.
func answerEnv(t *testing.T) (*actionEnv, *answeringProvider) {
	t.Helper()
	e := newActionEnv(t)
	ap := &answeringProvider{&psptest.Answering{Provider: e.p.Provider}}
	e.p.Provider = ap
	return e, ap
}

// keyOutcome is what a key holds after its request: its state, its stored status and the
// code of its stored problem ("" for none).
type keyOutcome struct {
	State  string
	Status int
	Code   string
}

func (e *actionEnv) keyOutcome(key string) keyOutcome {
	e.t.Helper()
	var row struct {
		State  string  `db:"state"`
		Status *int    `db:"response_status"`
		Body   []byte  `db:"response_body"`
		Reason *string `db:"attention_reason"`
	}
	if err := e.db.Get(&row, `SELECT state, response_status, response_body, attention_reason FROM idempotency_keys
		WHERE client_id = $1 AND key = $2`, e.client.ID, key); err != nil {
		e.t.Fatalf("key %s: %v", key, err)
	}
	o := keyOutcome{State: row.State}
	if row.Status != nil {
		o.Status = *row.Status
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(row.Body, &p)
		o.Code = p.Code
	}
	return o
}

// refundAnswer asks for a refund through the API's path and returns the client's status and
// problem code ("" for a 201).
func (e *actionEnv) refundAnswer(key, order string, amount int64) (int, string) {
	e.t.Helper()
	in := RefundInput{Amount: amount}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateRefund(context.Background(), Request{Client: e.client, Key: key, Method: "POST",
		Path: "/v1/orders/" + order + "/refunds", Body: body}, Lookup{}, order, in)
	return e.answered(res, err)
}

func (e *actionEnv) answered(res Result, err error) (int, string) {
	e.t.Helper()
	var p *problem.Problem
	switch {
	case errors.As(err, &p):
		return p.Status, string(p.Code)
	case err != nil:
		e.t.Fatalf("request: %v", err)
	}
	if res.Status >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(res.Body, &p); err != nil {
			e.t.Fatalf("stored problem %s: %v", res.Body, err)
		}
		return res.Status, p.Code
	}
	return res.Status, ""
}

// orderLedger is what tekrar holds of an order's refunds.
type orderLedger struct {
	Status       string `db:"status"`
	Refunded     int64  `db:"refunded_amount"`
	FromProvider int64  `db:"from_provider"` // refunds recorded as made at the provider
	Failed       int64  `db:"failed"`
	Pending      int64  `db:"pending"`
}

func (e *actionEnv) orderLedger(order string) orderLedger {
	e.t.Helper()
	var l orderLedger
	if err := e.db.Get(&l, `
		SELECT o.status, o.refunded_amount,
		       (SELECT count(*) FROM refunds r WHERE r.order_id = o.id AND r.reason = 'refunded at the payment provider' AND r.status = 'succeeded') AS from_provider,
		       (SELECT count(*) FROM refunds r WHERE r.order_id = o.id AND r.status = 'failed') AS failed,
		       (SELECT count(*) FROM refunds r WHERE r.order_id = o.id AND r.status = 'pending') AS pending
		  FROM orders o WHERE o.public_id = $1`, order); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// deliverChargeEvent hands the inbox the provider's newest event of the order's charge, as
// its webhook would bring it.
func (e *actionEnv) deliverChargeEvent(order string) {
	e.t.Helper()
	var body []byte
	if err := e.db.Get(&body, `
		SELECT ev.body::bytea FROM psp_events ev JOIN payments p ON p.provider_charge_id = ev.charge_id
		  JOIN orders o ON o.id = p.order_id
		 WHERE o.public_id = $1 ORDER BY ev.seq DESC LIMIT 1`, order); err != nil {
		e.t.Fatalf("the charge's newest event: %v", err)
	}
	var ev psp.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.receiveProviderEvent(body, ev); err != nil {
		e.t.Fatalf("receive %s: %v", ev.Type, err)
	}
}

// TestRefundAfterADashboardRefund: the charge was refunded at the provider's dashboard and
// its webhook is not in yet when a refund arrives through the API. The provider refuses it
// (refund_exceeds_charge), a final answer: the client is told so at once (409
// refunded_at_provider) and so is its retry, replayed; the dashboard's refund is recorded on
// the order from the provider's record, once, and the webhook arriving later records
// nothing more. Before, the key stayed in progress and the refund pending for ever, the
// client was told 503 payment_pending on every retry, and the dashboard refund never reached
// the order.
func TestRefundAfterADashboardRefund(t *testing.T) {
	cases := []struct {
		name      string
		dashboard int64 // of 9000
		refund    int64
		want      orderLedger
	}{
		{"refunded in full at the dashboard", 9000, 9000, orderLedger{Status: StatusRefunded, Refunded: 9000, FromProvider: 1, Failed: 1}},
		{"refunded in part at the dashboard", 6000, 9000, orderLedger{Status: StatusPartiallyRefunded, Refunded: 6000, FromProvider: 1, Failed: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newActionEnvWithWebhooks(t)
			ctx := context.Background()
			order, status := e.order("k-pay", psp.TokenVisa, 9000)
			if status != http.StatusCreated {
				t.Fatalf("order: %d", status)
			}
			chargeID := e.str(`SELECT p.provider_charge_id FROM payments p JOIN orders o ON o.id = p.order_id WHERE o.public_id = $1`, order)
			if _, err := e.p.Provider.(*psp.Sandbox).DashboardRefund(ctx, chargeID, tc.dashboard, "goodwill"); err != nil {
				t.Fatal(err)
			}
			for try := range 2 {
				if st, code := e.refundAnswer("k-refund", order, tc.refund); st != http.StatusConflict || code != string(problem.CodeRefundedAtProvider) {
					t.Fatalf("try %d: %d %s, want 409 refunded_at_provider", try, st, code)
				}
			}
			if got := e.keyOutcome("k-refund"); got != (keyOutcome{StateCompleted, http.StatusConflict, string(problem.CodeRefundedAtProvider)}) {
				t.Errorf("the refund's key: %+v", got)
			}
			if got := e.orderLedger(order); got != tc.want {
				t.Errorf("the order: %+v\nwant       %+v", got, tc.want)
			}
			// The dashboard refund's webhook arrives late: counted already, nothing more.
			e.deliverChargeEvent(order)
			if got := e.orderLedger(order); got != tc.want {
				t.Errorf("after the webhook: %+v\nwant              %+v", got, tc.want)
			}
			if n := e.count(`SELECT count(*) FROM outbox_events WHERE type = 'order.refunded'`); n != 1 {
				t.Errorf("%d order.refunded events, want the dashboard refund's one", n)
			}
			if rest := 9000 - tc.dashboard; rest > 0 {
				if st, code := e.refundAnswer("k-rest", order, rest); st != http.StatusCreated {
					t.Errorf("refunding the rest: %d %s", st, code)
				}
				if got := e.orderLedger(order); got.Status != StatusRefunded || got.Refunded != 9000 {
					t.Errorf("after refunding the rest: %+v", got)
				}
			}
			if n := e.count(`SELECT refunded_amount FROM psp_charges WHERE id = $1`, chargeID); n != 9000 && tc.dashboard == 9000 {
				t.Errorf("the provider refunded %d", n)
			}
		})
	}
}

// newActionEnvWithWebhooks is newActionEnv with a sandbox that records its events (they are
// not sent: tests hand them to the inbox).
func newActionEnvWithWebhooks(t *testing.T) *actionEnv {
	t.Helper()
	e := newActionEnv(t)
	e.p.Provider = psp.NewSandbox(e.db, psp.SandboxOptions{Webhooks: &psp.WebhookOptions{URL: "http://127.0.0.1:1/unused"}})
	return e
}

// TestRefundAnswers drives a refund through every row of the refund table: the key's state
// afterwards, its stored answer, and what the client is told, first and on a retry.
func TestRefundAnswers(t *testing.T) {
	unknown := errors.New("connection reset")
	cases := []struct {
		err     error
		status  int
		code    string
		key     keyOutcome
		ledger  orderLedger
		replays bool // the retry is the stored answer
	}{
		{nil, 201, "", keyOutcome{StateCompleted, 201, ""}, orderLedger{Status: StatusRefunded, Refunded: 4000}, true},
		{psp.ErrNotRefundable, 422, "refund_refused", keyOutcome{StateCompleted, 422, "refund_refused"}, orderLedger{Status: StatusPaid, Failed: 1}, true},
		{psp.ErrNotFound, 422, "refund_refused", keyOutcome{StateCompleted, 422, "refund_refused"}, orderLedger{Status: StatusPaid, Failed: 1}, true},
		{fmt.Errorf("%w: amount", psp.ErrInvalidRequest), 422, "refund_refused", keyOutcome{StateCompleted, 422, "refund_refused"}, orderLedger{Status: StatusPaid, Failed: 1}, true},
		{psp.ErrKeyReused, 503, "needs_attention", keyOutcome{State: StateNeedsAttention}, orderLedger{Status: StatusPaid, Refunded: 4000, Pending: 1}, false},
		// refund_exceeds_charge while the charge, looked up, has room: not final; asked again.
		// (Refused by a charge refunded at the dashboard: TestRefundAfterADashboardRefund.)
		{psp.ErrRefundExceedsCharge, 503, "payment_pending", keyOutcome{State: StateInProgress}, orderLedger{Status: StatusPaid, Refunded: 4000, Pending: 1}, false},
		{unknown, 503, "payment_pending", keyOutcome{State: StateInProgress}, orderLedger{Status: StatusPaid, Refunded: 4000, Pending: 1}, false},
	}
	covered := map[error]bool{}
	for _, tc := range cases {
		name := "result"
		if tc.err != nil {
			name = tc.err.Error()
		}
		t.Run(name, func(t *testing.T) {
			e, ap := answerEnv(t)
			order, status := e.order("k-pay", psp.TokenVisa, 4000)
			if status != http.StatusCreated {
				t.Fatalf("order: %d", status)
			}
			ap.force(psp.OpRefund, tc.err)
			for try := range 2 {
				st, code := e.refundAnswer("k-refund", order, 4000)
				if tc.status != st || tc.code != code {
					t.Fatalf("try %d: %d %s, want %d %s", try, st, code, tc.status, tc.code)
				}
			}
			if got := e.keyOutcome("k-refund"); got != tc.key {
				t.Errorf("key %+v, want %+v", got, tc.key)
			}
			if got := e.orderLedger(order); got != tc.ledger {
				t.Errorf("order %+v, want %+v", got, tc.ledger)
			}
		})
		covered[psp.AnswerOf(psp.OpRefund, tc.err).Err] = true
	}
	for _, a := range psp.AnswerTable(psp.OpRefund) {
		if !covered[a.Err] {
			t.Errorf("the refund table's row %v has no case", a.Err)
		}
	}
}

// TestChargeAnswers drives an order's charge through every row of the charge table.
func TestChargeAnswers(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
		key    keyOutcome
		order  string
	}{
		{nil, 201, "", keyOutcome{StateCompleted, 201, ""}, StatusPaid},
		{psp.ErrKeyCanceled, 409, "payment_abandoned", keyOutcome{StateCompleted, 409, "payment_abandoned"}, "canceled"},
		{psp.ErrKeyReused, 503, "needs_attention", keyOutcome{State: StateNeedsAttention}, "pending"},
		{fmt.Errorf("%w: currency", psp.ErrInvalidRequest), 503, "needs_attention", keyOutcome{State: StateNeedsAttention}, "pending"},
		{errors.New("connection reset"), 503, "payment_pending", keyOutcome{State: StateInProgress}, "pending"},
	}
	covered := map[error]bool{}
	for _, tc := range cases {
		name := "result"
		if tc.err != nil {
			name = tc.err.Error()
		}
		t.Run(name, func(t *testing.T) {
			e, ap := answerEnv(t)
			ap.force(psp.OpCharge, tc.err)
			in := OrderInput{Currency: "TRY", Amount: 2500, Payment: PaymentInput{CardToken: psp.TokenVisa},
				Items: []Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: 2500}}}
			body, _ := json.Marshal(in)
			res, err := e.s.CreateOrder(context.Background(), Request{Client: e.client, Key: "k-pay", Method: "POST", Path: "/v1/orders", Body: body}, Lookup{}, in)
			if st, code := e.answered(res, err); st != tc.status || code != tc.code {
				t.Fatalf("%d %s, want %d %s", st, code, tc.status, tc.code)
			}
			if got := e.keyOutcome("k-pay"); got != tc.key {
				t.Errorf("key %+v, want %+v", got, tc.key)
			}
			if got := e.str(`SELECT o.status FROM orders o JOIN idempotency_keys k ON k.order_id = o.id WHERE k.key = 'k-pay'`); got != tc.order {
				t.Errorf("order %s, want %s", got, tc.order)
			}
		})
		covered[psp.AnswerOf(psp.OpCharge, tc.err).Err] = true
	}
	for _, a := range psp.AnswerTable(psp.OpCharge) {
		if !covered[a.Err] {
			t.Errorf("the charge table's row %v has no case", a.Err)
		}
	}
}

// TestRefusedRefundOnEveryPath: a refund the provider refuses for good is settled the same
// way whoever finishes its key: the completer (a refund abandoned after an unknown answer),
// an operator's release of a key needing attention, and an operator's refund from the
// console, which is told the stored problem.
func TestRefusedRefundOnEveryPath(t *testing.T) {
	want := keyOutcome{StateCompleted, http.StatusUnprocessableEntity, string(problem.CodeRefundRefused)}
	t.Run("completer", func(t *testing.T) {
		e, ap := answerEnv(t)
		order, _ := e.order("k-pay", psp.TokenVisa, 4000)
		ap.force(psp.OpRefund, errors.New("connection reset"))
		if st, code := e.refundAnswer("k-refund", order, 4000); st != 503 || code != "payment_pending" {
			t.Fatalf("first: %d %s", st, code)
		}
		ap.force(psp.OpRefund, psp.ErrNotRefundable)
		e.advance(2 * time.Hour) // past the completer's grace
		res, err := newCompleter(e.s, CompleterConfig{}).Pass(context.Background())
		if err != nil || res.Completed != 1 {
			t.Fatalf("completer: %+v %v, want one completed", res, err)
		}
		if got := e.keyOutcome("k-refund"); got != want {
			t.Errorf("key %+v, want %+v", got, want)
		}
		if got := e.orderLedger(order); got != (orderLedger{Status: StatusPaid, Failed: 1}) {
			t.Errorf("order %+v", got)
		}
	})
	t.Run("release", func(t *testing.T) {
		e, ap := answerEnv(t)
		order, _ := e.order("k-pay", psp.TokenVisa, 4000)
		ap.force(psp.OpRefund, errors.New("connection reset"))
		e.refundAnswer("k-refund", order, 4000)
		e.needsAttention("k-refund")
		ap.force(psp.OpRefund, psp.ErrNotRefundable)
		res, err := operatorOf(e.s).ReleaseKey(context.Background(), e.client.ID, "k-refund", e.record(false))
		if err != nil || !res.Done || res.Outcome != OutcomeRefundRefused {
			t.Fatalf("release: %+v %v", res, err)
		}
		if got := e.keyOutcome("k-refund"); got != want {
			t.Errorf("key %+v, want %+v", got, want)
		}
		if st, code := e.refundAnswer("k-refund", order, 4000); st != 422 || code != string(problem.CodeRefundRefused) {
			t.Errorf("the retry after the release: %d %s", st, code)
		}
	})
	t.Run("console", func(t *testing.T) {
		e, ap := answerEnv(t)
		order, _ := e.order("k-pay", psp.TokenVisa, 4000)
		ap.force(psp.OpRefund, psp.ErrNotRefundable)
		in := OperatorRefund{OrderID: order, RefundInput: RefundInput{Amount: 4000}, Nonce: "nonce-0123456789abcdef"}
		for try := range 2 {
			_, err := operatorOf(e.s).RefundAsOperator(context.Background(), in)
			var p *problem.Problem
			if !errors.As(err, &p) || p.Code != problem.CodeRefundRefused {
				t.Fatalf("try %d: %v, want refund_refused", try, err)
			}
		}
	})
}

// TestLookupAndCancelAnswers drives an abandoned order's key through the completer with every
// row of the charge look-up and cancel tables: the key's state and stored answer afterwards.
func TestLookupAndCancelAnswers(t *testing.T) {
	unknown := errors.New("connection reset")
	cases := []struct {
		name        string
		charged     bool  // the abandoned attempt's charge was made (its answer lost)
		lookup      error // forced answer of the look-up; nil: the sandbox's
		cancel      error // forced answer of the cancel; nil: the sandbox's
		key         keyOutcome
		order       string
		compensated bool
	}{
		{"look-up finds the charge", true, nil, nil, keyOutcome{StateCompleted, 201, ""}, StatusPaid, false},
		{"none yet, fenced", false, nil, nil, keyOutcome{StateCompleted, 409, "payment_abandoned"}, "canceled", false},
		{"none yet, cancel unsupported", false, nil, psp.ErrCancelUnsupported, keyOutcome{StateCompleted, 409, "payment_abandoned"}, "canceled", true},
		{"none yet, cancel unknown", false, nil, unknown, keyOutcome{State: StateInProgress}, "pending", false},
		{"look-up refused as malformed", false, psp.ErrInvalidRequest, nil, keyOutcome{State: StateNeedsAttention}, "pending", false},
		{"look-up unknown", false, unknown, nil, keyOutcome{State: StateInProgress}, "pending", false},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ap := answerEnv(t)
			mode := "down"
			if tc.charged {
				mode = "lost"
			}
			e.p.set(mode)
			if _, status := e.order("k-pay", psp.TokenVisa, 2500); status != http.StatusServiceUnavailable {
				t.Fatalf("the abandoned attempt: %d", status)
			}
			e.p.set("")
			ap.force(psp.OpLookupCharge, tc.lookup)
			ap.force(psp.OpCancelCharge, tc.cancel)
			e.advance(2 * time.Hour) // past the grace, before the completer's attention
			if _, err := newCompleter(e.s, CompleterConfig{AttentionAfter: 24 * time.Hour}).Pass(context.Background()); err != nil {
				t.Fatalf("completer: %v", err)
			}
			if got := e.keyOutcome("k-pay"); got != tc.key {
				t.Errorf("key %+v, want %+v", got, tc.key)
			}
			if got := e.str(`SELECT o.status FROM orders o JOIN idempotency_keys k ON k.order_id = o.id WHERE k.key = 'k-pay'`); got != tc.order {
				t.Errorf("order %s, want %s", got, tc.order)
			}
			if n := e.count(`SELECT count(*) FROM compensations`); (n == 1) != tc.compensated {
				t.Errorf("%d compensations, want compensated %v", n, tc.compensated)
			}
		})
		covered[psp.OpLookupCharge+":"+fmt.Sprint(psp.AnswerOf(psp.OpLookupCharge, tc.lookup).Err)] = true
		if !tc.charged && tc.lookup == nil {
			covered[psp.OpLookupCharge+":"+fmt.Sprint(psp.ErrNotFound)] = true
			covered[psp.OpCancelCharge+":"+fmt.Sprint(psp.AnswerOf(psp.OpCancelCharge, tc.cancel).Err)] = true
		}
	}
	for _, op := range []string{psp.OpLookupCharge, psp.OpCancelCharge} {
		for _, a := range psp.AnswerTable(op) {
			if !covered[op+":"+fmt.Sprint(a.Err)] {
				t.Errorf("the %s table's row %v has no case", op, a.Err)
			}
		}
	}
}

// TestLookupRefundAnswers resumes a refund whose first answer was unknown through every row
// of the refund look-up table.
func TestLookupRefundAnswers(t *testing.T) {
	unknown := errors.New("connection reset")
	cases := []struct {
		name   string
		made   bool  // the first attempt's refund was made (its answer lost)
		lookup error // forced; nil: the sandbox's
		status int
		code   string
		key    keyOutcome
	}{
		{"found", true, nil, 201, "", keyOutcome{StateCompleted, 201, ""}},
		{"none yet: refunded now", false, nil, 201, "", keyOutcome{StateCompleted, 201, ""}},
		{"refused as malformed", false, psp.ErrInvalidRequest, 503, "needs_attention", keyOutcome{State: StateNeedsAttention}},
		{"unknown", false, unknown, 503, "payment_pending", keyOutcome{State: StateInProgress}},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ap := answerEnv(t)
			order, _ := e.order("k-pay", psp.TokenVisa, 4000)
			mode := "down"
			if tc.made {
				mode = "lost"
			}
			e.p.set(mode)
			if st, code := e.refundAnswer("k-refund", order, 4000); st != 503 || code != "payment_pending" {
				t.Fatalf("first: %d %s", st, code)
			}
			e.p.set("")
			ap.force(psp.OpLookupRefund, tc.lookup)
			if st, code := e.refundAnswer("k-refund", order, 4000); st != tc.status || code != tc.code {
				t.Fatalf("resumed: %d %s, want %d %s", st, code, tc.status, tc.code)
			}
			if got := e.keyOutcome("k-refund"); got != tc.key {
				t.Errorf("key %+v, want %+v", got, tc.key)
			}
			if n := e.count(`SELECT count(*) FROM psp_refunds`); (n == 1) != (tc.status == 201) {
				t.Errorf("%d refunds at the provider", n)
			}
		})
		err := tc.lookup
		if err == nil && !tc.made {
			err = psp.ErrNotFound
		}
		covered[fmt.Sprint(psp.AnswerOf(psp.OpLookupRefund, err).Err)] = true
	}
	for _, a := range psp.AnswerTable(psp.OpLookupRefund) {
		if !covered[fmt.Sprint(a.Err)] {
			t.Errorf("the lookup_refund table's row %v has no case", a.Err)
		}
	}
}

// TestFingerprintAnswers: the rows of the card fingerprint table, through an order's
// re-tokenized retry, the one request that asks (a first arrival's card comes from its
// charge's answer). The charge listing's are checkout/reconcile's TestListAnswers.
func TestFingerprintAnswers(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int // 422 idempotency_key_reused, 503 card_identity_unavailable
	}{
		{nil, 201},
		{psp.ErrNotFound, 422},
		{psp.ErrInvalidRequest, 422},
		{errors.New("connection reset"), 503},
	} {
		t.Run(fmt.Sprint("fingerprint ", tc.err), func(t *testing.T) {
			e, ap := answerEnv(t)
			ap.force(psp.OpCardFingerprint, errors.New("the look-up is not asked on a first arrival"))
			if _, status := e.order("k-pay", "tok_visa_1", 2500); status != 201 {
				t.Fatalf("first arrival: %d, want 201", status)
			}
			if n := e.count(`SELECT count(*) FROM idempotency_keys WHERE key = 'k-pay' AND card_fingerprint IS NOT NULL`); n != 1 {
				t.Fatalf("the key does not keep the charge's card")
			}
			ap.force(psp.OpCardFingerprint, tc.err)
			_, status := e.order("k-pay", "tok_visa_2", 2500)
			if status != tc.status {
				t.Fatalf("re-tokenized retry: %d, want %d", status, tc.status)
			}
			if n := e.count(`SELECT count(*) FROM psp_charges`); n != 1 {
				t.Errorf("%d charges, want 1", n)
			}
		})
	}
}
