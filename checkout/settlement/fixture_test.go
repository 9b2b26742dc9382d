package settlement

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/installments"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/problem"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// utc reads an instant written in RFC 3339.
func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// actionEnv is a checkout service on a fresh database with one client, paying on the
// sandbox provider, with a clock of its own: what the movements a settlement counts are
// made with, through the same calls the API makes.
type actionEnv struct {
	t       *testing.T
	db      *sqlx.DB
	s       *checkout.Service
	sandbox *psp.Sandbox
	client  clients.Client
	now     time.Time
	mu      sync.Mutex
	charger *installments.Charger // the installment runs, on the env's clock and provider
}

func newActionEnv(t *testing.T) *actionEnv {
	t.Helper()
	db := dbtest.New(t)
	e := &actionEnv{t: t, db: db, now: time.Now().UTC().Truncate(time.Microsecond)}
	e.sandbox = psp.NewSandbox(db, psp.SandboxOptions{})
	now := func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }
	e.s = checkout.NewService(db, e.sandbox, checkout.Config{Routes: api.Routes, Now: now}, slog.New(slog.DiscardHandler))
	e.charger = installments.New(db, e.sandbox, installments.Config{Now: now}, nil)
	t.Cleanup(e.s.Close)
	var err error
	if e.client, err = clients.Create(context.Background(), db, "shop", clients.NewSecret()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *actionEnv) count(q string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.Get(&n, q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// order pays amount with token under key; it returns the order's public id and the
// answer's status.
func (e *actionEnv) order(key, token string, amount int64) (string, int) {
	e.t.Helper()
	in := checkout.OrderInput{Currency: "TRY", Amount: amount, Payment: checkout.PaymentInput{CardToken: token},
		Items: []checkout.Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: amount}}}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateOrder(context.Background(), checkout.Request{Client: e.client, Key: key, Method: "POST",
		Path: "/v1/orders", Body: body}, checkout.Lookup{}, in)
	if status, err := status(res, err); err != nil {
		e.t.Fatalf("order %s: %v", key, err)
	} else if status != http.StatusCreated {
		return "", status
	}
	var v checkout.OrderView
	if err := json.Unmarshal(res.Body, &v); err != nil {
		e.t.Fatal(err)
	}
	return v.ID, res.Status
}

// refund asks for a refund of order through the API's path, under key.
func (e *actionEnv) refund(key, order string, amount int64) int {
	e.t.Helper()
	in := checkout.RefundInput{Amount: amount}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateRefund(context.Background(), checkout.Request{Client: e.client, Key: key, Method: "POST",
		Path: "/v1/orders/" + order + "/refunds", Body: body}, checkout.Lookup{}, order, in)
	st, err := status(res, err)
	if err != nil {
		e.t.Fatalf("refund %s: %v", key, err)
	}
	return st
}

// status is the HTTP status of a keyed call's answer: its problem's, when it failed with one.
func status(res checkout.Result, err error) (int, error) {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p.Status, nil
	}
	return res.Status, err
}

// installmentEnv is an action env whose client keeps its days in zone, with a saved card
// of customer cus_1 to order installment plans on.
type installmentEnv struct {
	*actionEnv
	pm psp.PaymentMethod
}

func newInstallmentEnv(t *testing.T, zone string, now time.Time) *installmentEnv {
	t.Helper()
	e := &installmentEnv{actionEnv: newActionEnv(t)}
	e.now = now
	if _, err := e.db.Exec(`UPDATE clients SET time_zone = $2 WHERE id = $1`, e.client.ID, zone); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.pm, err = e.sandbox.SavePaymentMethod(context.Background(), e.client.ProviderCustomer("cus_1"), psp.TokenVisa); err != nil {
		t.Fatal(err)
	}
	return e
}

// plan orders amount in count installments on the saved card, under key; it returns the
// order's public id and internal id.
func (e *installmentEnv) plan(key string, amount int64, count int) (string, int64) {
	e.t.Helper()
	in := checkout.OrderInput{Currency: "TRY", Amount: amount, Installments: count,
		Payment: checkout.PaymentInput{Customer: "cus_1", PaymentMethod: e.pm.ID},
		Items:   []checkout.Item{{SKU: "SOFA", Name: "Sofa", Quantity: 1, UnitAmount: amount}}}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateOrder(context.Background(), checkout.Request{Client: e.client, Key: key, Method: "POST",
		Path: "/v1/orders", Body: body}, checkout.Lookup{}, in)
	if err != nil || res.Status != http.StatusCreated {
		e.t.Fatalf("order %s: %d %s %v", key, res.Status, res.Body, err)
	}
	var v checkout.OrderView
	if err := json.Unmarshal(res.Body, &v); err != nil {
		e.t.Fatal(err)
	}
	if len(v.Installments) != count || v.Installments[0].Status != "paid" || v.Installments[1].Status != "scheduled" {
		e.t.Fatalf("order %s answered installments %+v", key, v.Installments)
	}
	return v.ID, e.count(`SELECT id FROM orders WHERE public_id = $1`, v.ID)
}

// run runs the installment job at the instant at and returns what it did.
func (e *installmentEnv) run(at string) installments.Result {
	e.t.Helper()
	res, err := e.charger.Run(context.Background(), utc(at))
	if err != nil {
		e.t.Fatalf("installments at %s: %v", at, err)
	}
	return res
}
