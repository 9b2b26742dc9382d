package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/problem"
)

// switchedProvider is the sandbox behind a switch (psptest.Switched), under the short
// name the package's tests use.
type switchedProvider struct{ *psptest.Switched }

func (p *switchedProvider) set(mode string) { p.Set(mode) }

// actionEnv is a service on a fresh database with one client, and the actions' records.
type actionEnv struct {
	t        *testing.T
	db       *sqlx.DB
	s        *Service
	p        *switchedProvider
	client   clients.Client
	now      time.Time
	mu       sync.Mutex
	recorded []map[string]any
}

func newActionEnv(t *testing.T) *actionEnv {
	t.Helper()
	db := dbtest.New(t)
	// Microseconds, as Postgres keeps them: a frozen clock must compare equal to itself stored.
	e := &actionEnv{t: t, db: db, now: time.Now().UTC().Truncate(time.Microsecond)}
	e.p = &switchedProvider{&psptest.Switched{Provider: psp.NewSandbox(db, psp.SandboxOptions{})}}
	e.s = NewService(db, e.p, Config{Routes: testRoutes, Now: func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }}, slog.New(slog.DiscardHandler))
	t.Cleanup(e.s.Close)
	var err error
	if e.client, err = clients.Create(context.Background(), db, "shop", clients.NewSecret()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *actionEnv) advance(d time.Duration) { e.mu.Lock(); e.now = e.now.Add(d); e.mu.Unlock() }

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

func (e *actionEnv) count(q string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.Get(&n, q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *actionEnv) str(q string, args ...any) string {
	e.t.Helper()
	var s string
	if err := e.db.Get(&s, q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return s
}

// order pays amount with token under key; it returns the order's public id and the
// answer's status.
func (e *actionEnv) order(key, token string, amount int64) (string, int) {
	e.t.Helper()
	in := OrderInput{Currency: "TRY", Amount: amount, Payment: PaymentInput{CardToken: token},
		Items: []Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: amount}}}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateOrder(context.Background(), Request{Client: e.client, Key: key, Method: "POST", Path: "/v1/orders", Body: body}, Lookup{}, in)
	status := res.Status
	var p *problem.Problem
	if errors.As(err, &p) {
		status = p.Status
	} else if err != nil {
		e.t.Fatalf("order %s: %v", key, err)
	}
	return e.str(`SELECT coalesce((SELECT o.public_id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id
		 WHERE k.client_id = $1 AND k.key = $2), '')`, e.client.ID, key), status
}

// refund asks for a refund of order through the API's path, under key.
func (e *actionEnv) refund(key, order string, amount int64) int {
	e.t.Helper()
	in := RefundInput{Amount: amount}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateRefund(context.Background(), Request{Client: e.client, Key: key, Method: "POST",
		Path: "/v1/orders/" + order + "/refunds", Body: body}, Lookup{}, order, in)
	var p *problem.Problem
	if errors.As(err, &p) {
		return p.Status
	}
	if err != nil {
		e.t.Fatalf("refund %s: %v", key, err)
	}
	return res.Status
}

// needsAttention does to key what the completer does after TEKRAR_ATTENTION_AFTER without
// an answer from the provider.
func (e *actionEnv) needsAttention(key string) {
	e.t.Helper()
	res, err := e.db.Exec(`
		UPDATE idempotency_keys SET state = 'needs_attention', attention_reason = 'provider unreachable for 1h0m0s',
		       lease_expires_at = NULL
		 WHERE client_id = $1 AND key = $2 AND state = 'in_progress'`, e.client.ID, key)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		e.t.Fatalf("needs attention %s: %v (%d rows)", key, err, n)
	}
}

// problemCode is the code of err's problem, or "".
func problemCode(err error) string {
	var p *problem.Problem
	if errors.As(err, &p) {
		return string(p.Code)
	}
	return ""
}

// answer is a keyed request's status and body, or its problem's status and error.
func answer(res Result, err error) (int, []byte, error) {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p.Status, nil, err
	}
	return res.Status, res.Body, err
}
