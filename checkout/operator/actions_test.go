package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/sweeper"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/problem"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// actionEnv is the shared environment (checkouttest.Env) paying on the sandbox behind a
// switch, the operator's actions on it, and the actions' records.
type actionEnv struct {
	*checkouttest.Env
	ops      *Actions
	mu       sync.Mutex
	recorded []map[string]any
}

func newActionEnv(t *testing.T) *actionEnv {
	t.Helper()
	e := &actionEnv{Env: checkouttest.New(t, checkouttest.Options{Switch: true})}
	e.ops = New(e.DB, e.Service)
	return e
}

// record is a Recorder that keeps what it was given; fail makes it refuse.
func (e *actionEnv) record(fail bool) Recorder {
	return func(ctx context.Context, tx *sqlx.Tx, detail map[string]any) error {
		if fail {
			return errors.New("audit log unavailable")
		}
		e.mu.Lock()
		e.recorded = append(e.recorded, detail)
		e.mu.Unlock()
		return nil
	}
}

// answer is a keyed request's status and body, or its problem's status and error.
func answer(res checkout.Result, err error) (int, []byte, error) {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p.Status, nil, err
	}
	return res.Status, res.Body, err
}

func TestReleaseKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup leaves the key "k" as the operator finds it; provider is the provider's
		// mode during the release.
		setup         func(e *actionEnv)
		provider      string
		failRecord    bool
		done          bool
		outcome       string
		state         string // of the key afterwards
		orderStatus   string
		charges       int64 // in the provider's ledger
		refunded      int64 // in the provider's ledger
		storedStatus  int   // the key's stored response
		storedProblem string
	}{
		{
			name: "charge made, answer lost: settled as paid",
			setup: func(e *actionEnv) {
				e.Switch.Set("lost")
				e.Order("k", "tok_visa", 9000)
				e.NeedsAttention("k")
			},
			done: true, outcome: OutcomePaid, state: checkout.StateCompleted, orderStatus: "paid", charges: 1, storedStatus: 201,
		},
		{
			name: "declined, answer lost: settled as declined",
			setup: func(e *actionEnv) {
				e.Switch.Set("lost")
				e.Order("k", "tok_declined", 9000)
				e.NeedsAttention("k")
			},
			done: true, outcome: OutcomeDeclined, state: checkout.StateCompleted, orderStatus: "declined", charges: 1,
			storedStatus: 402, storedProblem: "payment_declined",
		},
		{
			name: "provider never reached: canceled, nothing charged",
			setup: func(e *actionEnv) {
				e.Switch.Set("down")
				e.Order("k", "tok_visa", 9000)
				e.NeedsAttention("k")
			},
			done: true, outcome: OutcomeCanceled, state: checkout.StateCompleted, orderStatus: "canceled", charges: 0,
			storedStatus: 409, storedProblem: "payment_abandoned",
		},
		{
			name: "provider still down: nothing changes",
			setup: func(e *actionEnv) {
				e.Switch.Set("down")
				e.Order("k", "tok_visa", 9000)
				e.NeedsAttention("k")
			},
			provider: "down",
			outcome:  OutcomeStillUnknown, state: checkout.StateNeedsAttention, orderStatus: "pending", charges: 0,
		},
		{
			name: "the record cannot be written: nothing changes",
			setup: func(e *actionEnv) {
				e.Switch.Set("lost")
				e.Order("k", "tok_visa", 9000)
				e.NeedsAttention("k")
			},
			failRecord: true,
			state:      checkout.StateNeedsAttention, orderStatus: "pending", charges: 1,
		},
		{
			name: "refund never sent: made now, once",
			setup: func(e *actionEnv) {
				id, _ := e.Order("k-order", "tok_visa", 9000)
				e.Switch.Set("down")
				if st := e.Refund("k", id, 2500); st != http.StatusServiceUnavailable {
					e.T.Fatalf("refund while the provider is down: %d", st)
				}
				e.NeedsAttention("k")
			},
			done: true, outcome: OutcomeRefunded, state: checkout.StateCompleted, orderStatus: "partially_refunded", charges: 1, refunded: 2500, storedStatus: 201,
		},
		{
			name: "refund made, answer lost: finished, not made twice",
			setup: func(e *actionEnv) {
				id, _ := e.Order("k-order", "tok_visa", 9000)
				e.Switch.Set("lost")
				e.Refund("k", id, 2500)
				e.NeedsAttention("k")
			},
			done: true, outcome: OutcomeRefunded, state: checkout.StateCompleted, orderStatus: "partially_refunded", charges: 1, refunded: 2500, storedStatus: 201,
		},
		{
			name: "a key that does not need attention is left alone",
			setup: func(e *actionEnv) {
				e.Order("k", "tok_visa", 9000)
			},
			outcome: OutcomeNotNeeded, state: checkout.StateCompleted, orderStatus: "paid", charges: 1, storedStatus: 201,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newActionEnv(t)
			tc.setup(e)
			e.Switch.Set(tc.provider)
			res, err := e.ops.ReleaseKey(context.Background(), e.Client.ID, "k", e.record(tc.failRecord))
			if tc.failRecord {
				if err == nil || !strings.Contains(err.Error(), "audit log unavailable") {
					t.Fatalf("release with a failing record: %+v %v", res, err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if res.Done != tc.done || res.Outcome != tc.outcome {
				t.Fatalf("release: done %v outcome %q, want %v %q (%v)", res.Done, res.Outcome, tc.done, tc.outcome, res.Detail)
			}
			if n := len(e.recorded); (n == 1) != tc.done || n > 1 {
				t.Fatalf("%d records for done=%v: %v", n, tc.done, e.recorded)
			}
			if tc.done && e.recorded[0]["outcome"] != tc.outcome {
				t.Fatalf("recorded %v", e.recorded[0])
			}
			if st := e.Text(`SELECT state FROM idempotency_keys WHERE key = 'k'`); st != tc.state {
				t.Fatalf("key state %s, want %s", st, tc.state)
			}
			if st := e.Text(`SELECT o.status FROM orders o ORDER BY o.id LIMIT 1`); st != tc.orderStatus {
				t.Fatalf("order %s, want %s", st, tc.orderStatus)
			}
			if n := e.Count(`SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != tc.charges {
				t.Fatalf("%d charges at the provider, want %d", n, tc.charges)
			}
			if n := e.Count(`SELECT coalesce(sum(amount), 0) FROM psp_refunds`); n != tc.refunded {
				t.Fatalf("provider refunded %d, want %d", n, tc.refunded)
			}
			if tc.storedStatus != 0 {
				var stored struct {
					Status int     `db:"response_status"`
					Body   []byte  `db:"response_body"`
					Reason *string `db:"attention_reason"`
				}
				if err := e.DB.Get(&stored, `SELECT response_status, response_body, attention_reason FROM idempotency_keys WHERE key = 'k'`); err != nil {
					t.Fatal(err)
				}
				if stored.Status != tc.storedStatus || !strings.Contains(string(stored.Body), tc.storedProblem) || stored.Reason != nil && tc.done {
					t.Fatalf("stored %d %s (attention reason %v)", stored.Status, stored.Body, stored.Reason)
				}
			}
			// Releasing again is a no-op.
			again, err := e.ops.ReleaseKey(context.Background(), e.Client.ID, "k", e.record(false))
			if err != nil || (tc.done && (again.Done || again.Outcome != OutcomeNotNeeded)) {
				t.Fatalf("second release: %+v %v", again, err)
			}
		})
	}
}

// A released order replays what the release stored, byte for byte, to the app's retry.
func TestReleasedKeyReplays(t *testing.T) {
	e := newActionEnv(t)
	e.Switch.Set("lost")
	id, status := e.Order("k", "tok_visa", 9000)
	if status != http.StatusServiceUnavailable {
		t.Fatalf("order with a lost answer: %d", status)
	}
	e.NeedsAttention("k")
	if _, st := e.Order("k", "tok_visa", 9000); st != http.StatusServiceUnavailable {
		t.Fatalf("retry while it needs attention: %d", st)
	}
	e.Switch.Set("")
	if res, err := e.ops.ReleaseKey(context.Background(), e.Client.ID, "k", e.record(false)); err != nil || res.Outcome != OutcomePaid {
		t.Fatalf("release: %+v %v", res, err)
	}
	again, st := e.Order("k", "tok_visa", 9000)
	if st != http.StatusCreated || again != id {
		t.Fatalf("retry after the release: %d (order %s, want %s)", st, again, id)
	}
	if n := e.Count(`SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Fatalf("%d charges", n)
	}
}

func TestExpireKey(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	e.Order("k", "tok_visa", 9000)
	e.Switch.Set("down")
	e.Order("k-open", "tok_visa", 9000) // in progress: the provider's answer is not known
	e.Order("k-stuck", "tok_visa", 9000)
	e.NeedsAttention("k-stuck")
	e.Switch.Set("")

	for _, key := range []string{"k-open", "k-stuck"} {
		if _, err := e.ops.ExpireKey(ctx, e.Client.ID, key, e.record(false)); !errors.Is(err, ErrKeyBusy) {
			t.Fatalf("expire %s: %v, want ErrKeyBusy", key, err)
		}
	}
	if _, err := e.ops.ExpireKey(ctx, e.Client.ID, "no-such-key", e.record(false)); !errors.Is(err, checkout.ErrKeyNotFound) {
		t.Fatalf("expire an unknown key: %v", err)
	}
	if _, err := e.ops.ExpireKey(ctx, e.Client.ID, "k", e.record(true)); err == nil {
		t.Fatal("expired without its record")
	}
	if n := e.Count(`SELECT count(*) FROM idempotency_keys WHERE key = 'k' AND expires_at > $1`, e.Now()); n != 1 {
		t.Fatal("a failed record left the key expired")
	}

	res, err := e.ops.ExpireKey(ctx, e.Client.ID, "k", e.record(false))
	if err != nil || !res.Done || res.Outcome != OutcomeExpired || len(e.recorded) != 1 {
		t.Fatalf("expire: %+v %v (%d records)", res, err, len(e.recorded))
	}
	e.Advance(time.Second)
	if _, st := e.Order("k", "tok_visa", 9000); st != http.StatusUnprocessableEntity {
		t.Fatalf("retry of an expired key: %d", st)
	}
	res, err = e.ops.ExpireKey(ctx, e.Client.ID, "k", e.record(false))
	if err != nil || res.Done || res.Outcome != OutcomeAlreadyExpired || len(e.recorded) != 1 {
		t.Fatalf("expire again: %+v %v (%d records)", res, err, len(e.recorded))
	}

	sw := sweeper.New(e.DB, sweeper.Config{Now: e.Now}, slog.New(slog.DiscardHandler))
	if r, err := sw.Pass(ctx); err != nil || r.KeysTombstoned != 1 {
		t.Fatalf("sweep: %+v %v", r, err)
	}
	e.Advance(2 * time.Minute)
	if r, err := sw.Pass(ctx); err != nil || r.KeysDeleted != 1 {
		t.Fatalf("second sweep: %+v %v", r, err)
	}
	res, err = e.ops.ExpireKey(ctx, e.Client.ID, "k", e.record(false))
	if err != nil || res.Done || res.State != checkout.KeyStateExpired {
		t.Fatalf("expire a swept key: %+v %v", res, err)
	}
	if _, st := e.Order("k", "tok_visa", 9000); st != http.StatusUnprocessableEntity {
		t.Fatalf("retry of a swept key: %d", st)
	}
	if n := e.Count(`SELECT count(*) FROM idempotency_keys WHERE key IN ('k-open', 'k-stuck')`); n != 2 {
		t.Fatal("unfinished keys were swept")
	}
}

func TestRefundAsOperator(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	id, _ := e.Order("k", "tok_visa", 9000)
	nonce := func(n int) string { return fmt.Sprintf("nonce-%02d-aaaaaaaaaaaaaaaa", n) }
	refund := func(n int, amount int64, reason string) (OperatorRefundResult, error) {
		return e.ops.RefundAsOperator(ctx, OperatorRefund{OrderID: id, RefundInput: checkout.RefundInput{Amount: amount, Reason: reason}, Nonce: nonce(n)})
	}
	first, err := refund(1, 2500, "cold coffee")
	if err != nil || first.Replayed || first.Pending || first.Refund.Amount != 2500 || first.ClientID != e.Client.ID ||
		first.Key != OperatorRefundKeyPrefix+nonce(1) {
		t.Fatalf("first refund: %+v %v", first, err)
	}
	again, err := refund(1, 2500, "cold coffee")
	if err != nil || !again.Replayed || again.Refund.ID != first.Refund.ID {
		t.Fatalf("the same form again: %+v %v", again, err)
	}
	if _, err := refund(1, 3000, "cold coffee"); checkouttest.ProblemCode(err) != "idempotency_key_reused" {
		t.Fatalf("the same form with another amount: %v", err)
	}
	if _, err := refund(2, 6501, ""); checkouttest.ProblemCode(err) != "refund_exceeds_captured" {
		t.Fatalf("over-refund: %v", err)
	}
	if _, err := refund(3, 2500, ""); err != nil {
		t.Fatalf("second refund: %v", err)
	}
	if _, err := e.ops.RefundAsOperator(ctx, OperatorRefund{OrderID: id, RefundInput: checkout.RefundInput{Amount: 1}, Nonce: "short"}); !errors.Is(err, ErrInvalidNonce) {
		t.Fatalf("bad nonce: %v", err)
	}
	if _, err := e.ops.RefundAsOperator(ctx, OperatorRefund{OrderID: "ord_" + strings.Repeat("0", 32), RefundInput: checkout.RefundInput{Amount: 1}, Nonce: nonce(4)}); !errors.Is(err, checkout.ErrOrderNotFound) {
		t.Fatalf("unknown order: %v", err)
	}

	e.Switch.Set("down")
	pending, err := refund(5, 1000, "")
	if err != nil || !pending.Pending || pending.Refund.Status != "pending" || pending.Refund.Amount != 1000 {
		t.Fatalf("refund while the provider is down: %+v %v", pending, err)
	}
	e.Switch.Set("")
	e.Advance(time.Second)
	if res, err := refund(5, 1000, ""); err != nil || res.Pending || res.Refund.ID != pending.Refund.ID {
		t.Fatalf("the pending form sent again: %+v %v", res, err)
	}

	if n := e.Count(`SELECT refunded_amount FROM orders WHERE public_id = $1`, id); n != 6000 {
		t.Fatalf("refunded_amount %d", n)
	}
	if n := e.Count(`SELECT coalesce(sum(amount), 0) FROM psp_refunds`); n != 6000 {
		t.Fatalf("the provider refunded %d", n)
	}
	if n := e.Count(`SELECT count(*) FROM refunds WHERE client_id = $1 AND status = 'succeeded'`, e.Client.ID); n != 3 {
		t.Fatalf("%d refunds", n)
	}
}

// TestConcurrentReleasesSettleOnce: several operators release the same stuck key at once
// while the app keeps retrying it. One release settles it and is recorded; the others find
// nothing to do; the provider charges or refunds once; every retry gets either the
// needs-attention answer or the stored result, never a second execution.
func TestConcurrentReleasesSettleOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(e *actionEnv) (retry func() (int, []byte, error))
		outcome string
		charges int64
		refund  int64
	}{
		{
			name: "charge made, answer lost",
			setup: func(e *actionEnv) func() (int, []byte, error) {
				e.Switch.Set("lost")
				e.Order("k", "tok_visa", 9000)
				e.NeedsAttention("k")
				e.Switch.Set("")
				in := checkout.OrderInput{Currency: "TRY", Amount: 9000, Payment: checkout.PaymentInput{CardToken: "tok_visa"},
					Items: []checkout.Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: 9000}}}
				body, _ := json.Marshal(in)
				return func() (int, []byte, error) {
					res, err := e.Service.CreateOrder(context.Background(), checkout.Request{Client: e.Client, Key: "k", Method: "POST", Path: "/v1/orders", Body: body}, checkout.Lookup{}, in)
					return answer(res, err)
				}
			},
			outcome: OutcomePaid, charges: 1,
		},
		{
			name: "refund never sent",
			setup: func(e *actionEnv) func() (int, []byte, error) {
				id, _ := e.Order("k-order", "tok_visa", 9000)
				e.Switch.Set("down")
				e.Refund("k", id, 2500)
				e.NeedsAttention("k")
				e.Switch.Set("")
				in := checkout.RefundInput{Amount: 2500}
				body, _ := json.Marshal(in)
				return func() (int, []byte, error) {
					res, err := e.Service.CreateRefund(context.Background(), checkout.Request{Client: e.Client, Key: "k", Method: "POST",
						Path: "/v1/orders/" + id + "/refunds", Body: body}, checkout.Lookup{}, id, in)
					return answer(res, err)
				}
			},
			outcome: OutcomeRefunded, charges: 1, refund: 2500,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newActionEnv(t)
			retry := tc.setup(e)
			const operators, retries = 8, 8
			type result struct {
				release ActionResult
				status  int
				body    []byte
				err     error
			}
			out := make([]result, operators+retries)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range out {
				wg.Go(func() {
					<-start
					if i < operators {
						out[i].release, out[i].err = e.ops.ReleaseKey(context.Background(), e.Client.ID, "k", e.record(false))
						return
					}
					out[i].status, out[i].body, out[i].err = retry()
				})
			}
			close(start)
			wg.Wait()

			done := 0
			for i, r := range out[:operators] {
				switch {
				case r.err != nil:
					t.Fatalf("release %d: %v", i, r.err)
				case r.release.Done:
					done++
					if r.release.Outcome != tc.outcome {
						t.Fatalf("release %d: outcome %q, want %q", i, r.release.Outcome, tc.outcome)
					}
				case r.release.Outcome != OutcomeNotNeeded:
					t.Fatalf("release %d did nothing, with outcome %q", i, r.release.Outcome)
				}
			}
			if done != 1 || len(e.recorded) != 1 {
				t.Fatalf("%d releases settled the key, %d were recorded; want 1 and 1", done, len(e.recorded))
			}
			var stored []byte
			if err := e.DB.Get(&stored, `SELECT response_body FROM idempotency_keys WHERE key = 'k' AND state = 'completed'`); err != nil {
				t.Fatalf("stored response: %v", err)
			}
			for i, r := range out[operators:] {
				switch {
				case checkouttest.ProblemCode(r.err) == "needs_attention":
					// before the release committed
				case r.err == nil && r.status == http.StatusCreated && string(r.body) == string(stored):
				default:
					t.Fatalf("retry %d: %d %s %v", i, r.status, r.body, r.err)
				}
			}
			if n := e.Count(`SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != tc.charges {
				t.Fatalf("%d charges at the provider, want %d", n, tc.charges)
			}
			if n := e.Count(`SELECT coalesce(sum(amount), 0) FROM psp_refunds`); n != tc.refund {
				t.Fatalf("provider refunded %d, want %d", n, tc.refund)
			}
		})
	}
}
