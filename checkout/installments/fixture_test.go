package installments

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/problem"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := clients.Location(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// utc reads an RFC 3339 instant of a test's calendar (fractions allowed).
func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// installmentEnv is a checkout service and a charger on a fresh database with one client,
// whose days are in zone, paying on the sandbox provider with a customer's saved card, on a
// clock of its own: the plans are ordered through the calls the API makes.
type installmentEnv struct {
	t       *testing.T
	db      *sqlx.DB
	s       *checkout.Service
	c       *Charger
	sandbox *psp.Sandbox
	client  clients.Client
	pm      psp.PaymentMethod
	mu      sync.Mutex
	now     time.Time
}

func newInstallmentEnv(t *testing.T, zone string, now time.Time) *installmentEnv {
	t.Helper()
	db := dbtest.New(t)
	e := &installmentEnv{t: t, db: db, now: now}
	e.sandbox = psp.NewSandbox(db, psp.SandboxOptions{})
	e.s = checkout.NewService(db, e.sandbox, checkout.Config{Routes: api.Routes, Now: e.clock}, slog.New(slog.DiscardHandler))
	t.Cleanup(e.s.Close)
	e.c = e.charger()
	var err error
	if e.client, err = clients.Create(context.Background(), db, "shop", clients.NewSecret()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(`UPDATE clients SET time_zone = $2 WHERE id = $1`, e.client.ID, zone); err != nil {
		t.Fatal(err)
	}
	if e.pm, err = e.sandbox.SavePaymentMethod(context.Background(), e.client.ProviderCustomer("cus_1"), psp.TokenVisa); err != nil {
		t.Fatal(err)
	}
	return e
}

// charger is a Charger of the env, as another process would run one.
func (e *installmentEnv) charger() *Charger {
	return New(e.db, e.sandbox, Config{Now: e.clock}, nil)
}

func (e *installmentEnv) clock() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }

func (e *installmentEnv) advance(d time.Duration) { e.mu.Lock(); e.now = e.now.Add(d); e.mu.Unlock() }

func (e *installmentEnv) count(q string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.Get(&n, q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *installmentEnv) str(q string, args ...any) string {
	e.t.Helper()
	var s string
	if err := e.db.Get(&s, q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return s
}

// plan orders amount in count installments on the saved card, under key; it returns the
// order's public id and internal id.
func (e *installmentEnv) plan(key string, amount int64, count int) (string, int64) {
	e.t.Helper()
	in := checkout.OrderInput{Currency: "TRY", Amount: amount, Installments: count,
		Payment: checkout.PaymentInput{Customer: "cus_1", PaymentMethod: e.pm.ID},
		Items:   []checkout.Item{{SKU: "SOFA", Name: "Sofa", Quantity: 1, UnitAmount: amount}}}
	if errs := in.Validate(); len(errs) > 0 {
		e.t.Fatalf("order %s: %v", key, errs)
	}
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

// refund asks for a refund of order through the API's path, under key, and returns the
// answer's status (its problem's, when it failed with one).
func (e *installmentEnv) refund(key, order string, amount int64) int {
	e.t.Helper()
	in := checkout.RefundInput{Amount: amount}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateRefund(context.Background(), checkout.Request{Client: e.client, Key: key, Method: "POST",
		Path: "/v1/orders/" + order + "/refunds", Body: body}, checkout.Lookup{}, order, in)
	var p *problem.Problem
	if errors.As(err, &p) {
		return p.Status
	}
	if err != nil {
		e.t.Fatalf("refund %s: %v", key, err)
	}
	return res.Status
}

// run runs the job at the instant at and returns what it did.
func (e *installmentEnv) run(at string) Result {
	e.t.Helper()
	res, err := e.c.run(context.Background(), utc(at))
	if err != nil {
		e.t.Fatalf("installments at %s: %v", at, err)
	}
	return res
}

// publicID is the public id of order id, which the provider is told ("order <public id>";
// an installment after the first adds " installment <n>").
func (e *installmentEnv) publicID(id int64) string {
	e.t.Helper()
	return e.str(`SELECT public_id FROM orders WHERE id = $1`, id)
}

// ledgerAgrees checks that tekrar and the provider hold the same charges of order id: one
// succeeded charge per paid installment, under the installment's key, for its amount, and
// the order's captured amount their sum.
func (e *installmentEnv) ledgerAgrees(id int64) {
	e.t.Helper()
	var rows []struct {
		N      int    `db:"n"`
		Amount int64  `db:"amount"`
		Key    string `db:"provider_key"`
		Charge string `db:"provider_charge_id"`
	}
	if err := e.db.Select(&rows, `SELECT n, amount, provider_key, provider_charge_id FROM installments
		 WHERE order_id = $1 AND status = 'paid' ORDER BY n`, id); err != nil {
		e.t.Fatal(err)
	}
	var captured int64
	for _, r := range rows {
		captured += r.Amount
		ch, err := e.sandbox.LookupCharge(context.Background(), r.Key)
		if err != nil || ch.ID != r.Charge || ch.Amount != r.Amount || ch.Status != psp.StatusSucceeded {
			e.t.Errorf("order %d installment %d: tekrar has %s for %d; the provider %+v %v", id, r.N, r.Charge, r.Amount, ch, err)
		}
	}
	if n := e.count(`SELECT count(*) FROM psp_charges WHERE (description = $1 OR description LIKE $2) AND status = 'succeeded'`,
		"order "+e.publicID(id), "order "+e.publicID(id)+" installment %"); n != int64(len(rows)) {
		e.t.Errorf("order %d: the provider holds %d succeeded charges, tekrar %d paid installments", id, n, len(rows))
	}
	if got := e.count(`SELECT captured_amount FROM orders WHERE id = $1`, id); got != captured {
		e.t.Errorf("order %d captured %d, its paid installments add up to %d", id, got, captured)
	}
}

// failWrites makes every insert or update of table fail, as a full disk or a lost
// connection would fail one statement in the middle.
func (e *installmentEnv) failWrites(table string) {
	e.t.Helper()
	for _, s := range []string{
		`CREATE OR REPLACE FUNCTION test_fail_write() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN RAISE EXCEPTION 'test: write to % refused', TG_TABLE_NAME; END $$`,
		`CREATE TRIGGER test_fail_write BEFORE INSERT OR UPDATE ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION test_fail_write()`,
	} {
		if _, err := e.db.Exec(s); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *installmentEnv) allowWrites(table string) {
	e.t.Helper()
	if _, err := e.db.Exec(`DROP TRIGGER test_fail_write ON ` + table); err != nil {
		e.t.Fatal(err)
	}
}

// eventStep is a step of a test and the events it must add, by type.
type eventStep struct {
	name string
	do   func()
	want map[string]int64 // events added by the step
}

// checkEventSteps runs the steps in order from the event counts have, checking after each
// that it added exactly its events, and at the end that every event has its dispatch job.
func (e *installmentEnv) checkEventSteps(have map[string]int64, steps []eventStep) {
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
	if n := e.count(`SELECT count(*) FROM outbox_events ev
		 WHERE NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = $1 AND j.args->>'event_id' = ev.id)`, outbox.KindDispatch); n != 0 {
		e.t.Errorf("%d events without their dispatch job", n)
	}
}

// eventCounts counts the client's events by type.
func (e *installmentEnv) eventCounts() map[string]int64 {
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
