// Package checkouttest is the one fixture of checkout's sub-packages' tests: a checkout
// service on a fresh database (internal/dbtest) with one client, paying on the sandbox
// provider, on a frozen clock, and the orders, plans and refunds made through the same calls
// the API makes. The roles' tests (operator, reconcile, installments, settlement) need the
// rows a real service writes, not rows written by hand, so they build the service as the
// app does; building it once here keeps them alike.
//
// It imports checkout, so the root package's own tests cannot use it (an import cycle):
// they keep actionEnv (checkout/actionenv_test.go), the same environment over the root's
// unexported names.
package checkouttest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/problem"
)

// Customer is the client's customer whose card Options.SavedCard saves: installment plans
// charge a saved card, never a one-off token.
const Customer = "cus_1"

// Options are what differs between the roles' environments; the zero value is a client in
// UTC paying on the sandbox itself, with the clock at the present.
type Options struct {
	// Switch puts the sandbox behind a switch (Env.Switch) that the service pays through, so
	// that a test can take the provider down or lose its answers (psptest.Switched).
	Switch bool
	// Zone is the client's time zone (its business day); "" keeps the default, UTC.
	Zone string
	// Now is where the clock starts; zero is the present.
	Now time.Time
	// SavedCard saves a visa card of Customer at the sandbox (Env.Card), to order plans on.
	SavedCard bool
	// Sandbox are the sandbox's options (KeyLess, NoCancel, KeyWindow); its clock is the
	// environment's unless they set one.
	Sandbox psp.SandboxOptions
}

// Env is a checkout service on a fresh database with one client, "shop".
type Env struct {
	T  *testing.T
	DB *sqlx.DB
	// URL is DB's database, for a test's own connections (a replay cache's listener).
	URL     string
	Service *checkout.Service
	Sandbox *psp.Sandbox
	// Switch is the switch in front of the sandbox (Options.Switch), or nil.
	Switch *psptest.Switched
	// Provider is what the service pays through: Switch when there is one, else Sandbox.
	// A role of the test (a charger, a reconciler) is given the same.
	Provider psp.Provider
	Client   clients.Client
	// Card is Customer's saved card (Options.SavedCard).
	Card psp.PaymentMethod
	Clock
}

// New builds the environment; the service is closed when the test ends.
func New(t *testing.T, o Options) *Env {
	t.Helper()
	url := dbtest.NewURL(t)
	db := dbtest.Connect(t, url)
	e := &Env{T: t, DB: db, URL: url}
	e.at = start(o.Now)
	sbOpts := o.Sandbox
	if (sbOpts.KeyLess || sbOpts.NoCancel || sbOpts.KeyWindow > 0) && sbOpts.Now == nil {
		// A mode's test moves the clock past what the sandbox times (its key window).
		sbOpts.Now = e.Now
	}
	e.Sandbox = psp.NewSandbox(db, sbOpts)
	e.Provider = e.Sandbox
	if o.Switch {
		e.Switch = &psptest.Switched{Provider: e.Sandbox}
		e.Provider = e.Switch
	}
	e.Service = checkout.NewService(db, e.Provider, checkout.Config{Routes: api.Routes, Now: e.Now}, slog.New(slog.DiscardHandler))
	t.Cleanup(e.Service.Close)
	set := clients.DefaultSettings
	if o.Zone != "" {
		set.TimeZone = o.Zone
	}
	var err error
	if e.Client, err = clients.CreateWith(context.Background(), db, "shop", clients.NewSecret(), set); err != nil {
		t.Fatal(err)
	}
	if o.SavedCard {
		if e.Card, err = e.Sandbox.SavePaymentMethod(context.Background(), e.Client.ProviderCustomer(Customer), psp.TokenVisa); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// Count reads one integer by q, failing the test if it cannot.
func (e *Env) Count(q string, args ...any) int64 {
	e.T.Helper()
	var n int64
	if err := e.DB.Get(&n, q, args...); err != nil {
		e.T.Fatalf("%s: %v", q, err)
	}
	return n
}

// Text reads one string by q, failing the test if it cannot.
func (e *Env) Text(q string, args ...any) string {
	e.T.Helper()
	var s string
	if err := e.DB.Get(&s, q, args...); err != nil {
		e.T.Fatalf("%s: %v", q, err)
	}
	return s
}

// Order pays amount with token under key, as POST /v1/orders does; it returns the public
// id of the key's order ("" when the key has none) and the answer's status (its problem's,
// when it failed with one). Any other error fails the test.
func (e *Env) Order(key, token string, amount int64) (string, int) {
	e.T.Helper()
	in := checkout.OrderInput{Currency: "TRY", Amount: amount, Payment: checkout.PaymentInput{CardToken: token},
		Items: []checkout.Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: amount}}}
	body, _ := json.Marshal(in)
	res, err := e.Service.CreateOrder(context.Background(), checkout.Request{Client: e.Client, Key: key, Method: "POST",
		Path: "/v1/orders", Body: body}, checkout.Lookup{}, in)
	status, err := Status(res, err)
	if err != nil {
		e.T.Fatalf("order %s: %v", key, err)
	}
	return e.Text(`SELECT coalesce((SELECT o.public_id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id
		 WHERE k.client_id = $1 AND k.key = $2), '')`, e.Client.ID, key), status
}

// Plan orders amount in count installments on the saved card (Options.SavedCard), under
// key; it returns the order's public id and internal id. Anything but a created order whose
// first installment is paid and the next scheduled fails the test.
func (e *Env) Plan(key string, amount int64, count int) (string, int64) {
	e.T.Helper()
	in := checkout.OrderInput{Currency: "TRY", Amount: amount, Installments: count,
		Payment: checkout.PaymentInput{Customer: Customer, PaymentMethod: e.Card.ID},
		Items:   []checkout.Item{{SKU: "SOFA", Name: "Sofa", Quantity: 1, UnitAmount: amount}}}
	if errs := in.Validate(); len(errs) > 0 {
		e.T.Fatalf("order %s: %v", key, errs)
	}
	body, _ := json.Marshal(in)
	res, err := e.Service.CreateOrder(context.Background(), checkout.Request{Client: e.Client, Key: key, Method: "POST",
		Path: "/v1/orders", Body: body}, checkout.Lookup{}, in)
	if err != nil || res.Status != http.StatusCreated {
		e.T.Fatalf("order %s: %d %s %v", key, res.Status, res.Body, err)
	}
	var v checkout.OrderView
	if err := json.Unmarshal(res.Body, &v); err != nil {
		e.T.Fatal(err)
	}
	if len(v.Installments) != count || v.Installments[0].Status != "paid" || v.Installments[1].Status != "scheduled" {
		e.T.Fatalf("order %s answered installments %+v", key, v.Installments)
	}
	return v.ID, e.Count(`SELECT id FROM orders WHERE public_id = $1`, v.ID)
}

// Refund asks for a refund of amount of order under key, as POST
// /v1/orders/{id}/refunds does, and returns the answer's status (its problem's, when it
// failed with one). Any other error fails the test.
func (e *Env) Refund(key, order string, amount int64) int {
	e.T.Helper()
	in := checkout.RefundInput{Amount: amount}
	body, _ := json.Marshal(in)
	res, err := e.Service.CreateRefund(context.Background(), checkout.Request{Client: e.Client, Key: key, Method: "POST",
		Path: "/v1/orders/" + order + "/refunds", Body: body}, checkout.Lookup{}, order, in)
	status, err := Status(res, err)
	if err != nil {
		e.T.Fatalf("refund %s: %v", key, err)
	}
	return status
}

// NeedsAttention does to key what the completer does after TEKRAR_ATTENTION_AFTER without
// an answer from the provider; the key must be in progress.
func (e *Env) NeedsAttention(key string) {
	e.T.Helper()
	res, err := e.DB.Exec(`
		UPDATE idempotency_keys SET state = 'needs_attention', attention_reason = 'provider unreachable for 1h0m0s',
		       lease_expires_at = NULL
		 WHERE client_id = $1 AND key = $2 AND state = 'in_progress'`, e.Client.ID, key)
	if err != nil {
		e.T.Fatalf("needs attention %s: %v", key, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		e.T.Fatalf("needs attention %s: %d rows", key, n)
	}
}

// Status is the HTTP status of a keyed call's answer: its problem's, when it failed with
// one (and then no error), else the result's and the error.
func Status(res checkout.Result, err error) (int, error) {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p.Status, nil
	}
	return res.Status, err
}

// ProblemCode is the code of err's problem, or "".
func ProblemCode(err error) string {
	var p *problem.Problem
	if errors.As(err, &p) {
		return string(p.Code)
	}
	return ""
}
