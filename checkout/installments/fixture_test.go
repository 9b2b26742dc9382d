package installments

import (
	"context"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// installmentEnv is the shared environment (checkouttest.Env) whose client's days are in
// zone, with a saved card to order plans on, and a charger on its clock and provider.
type installmentEnv struct {
	*checkouttest.Env
	c *Charger
}

func newInstallmentEnv(t *testing.T, zone string, now time.Time) *installmentEnv {
	t.Helper()
	e := &installmentEnv{Env: checkouttest.New(t, checkouttest.Options{Zone: zone, Now: now, SavedCard: true})}
	e.c = e.charger()
	return e
}

// charger is a Charger of the env, as another process would run one.
func (e *installmentEnv) charger() *Charger {
	return New(e.DB, e.Sandbox, Config{Now: e.Now}, nil)
}

// run runs the job at the instant at and returns what it did.
func (e *installmentEnv) run(at string) Result {
	e.T.Helper()
	res, err := e.c.run(context.Background(), checkouttest.UTC(at))
	if err != nil {
		e.T.Fatalf("installments at %s: %v", at, err)
	}
	return res
}

// publicID is the public id of order id, which the provider is told ("order <public id>";
// an installment after the first adds " installment <n>").
func (e *installmentEnv) publicID(id int64) string {
	e.T.Helper()
	return e.Text(`SELECT public_id FROM orders WHERE id = $1`, id)
}

// ledgerAgrees checks that tekrar and the provider hold the same charges of order id: one
// succeeded charge per paid installment, under the installment's key, for its amount, and
// the order's captured amount their sum.
func (e *installmentEnv) ledgerAgrees(id int64) {
	e.T.Helper()
	var rows []struct {
		N      int    `db:"n"`
		Amount int64  `db:"amount"`
		Key    string `db:"provider_key"`
		Charge string `db:"provider_charge_id"`
	}
	if err := e.DB.Select(&rows, `SELECT n, amount, provider_key, provider_charge_id FROM installments
		 WHERE order_id = $1 AND status = 'paid' ORDER BY n`, id); err != nil {
		e.T.Fatal(err)
	}
	var captured int64
	for _, r := range rows {
		captured += r.Amount
		ch, err := e.Sandbox.LookupCharge(context.Background(), r.Key)
		if err != nil || ch.ID != r.Charge || ch.Amount != r.Amount || ch.Status != psp.StatusSucceeded {
			e.T.Errorf("order %d installment %d: tekrar has %s for %d; the provider %+v %v", id, r.N, r.Charge, r.Amount, ch, err)
		}
	}
	if n := e.Count(`SELECT count(*) FROM psp_charges WHERE (description = $1 OR description LIKE $2) AND status = 'succeeded'`,
		"order "+e.publicID(id), "order "+e.publicID(id)+" installment %"); n != int64(len(rows)) {
		e.T.Errorf("order %d: the provider holds %d succeeded charges, tekrar %d paid installments", id, n, len(rows))
	}
	if got := e.Count(`SELECT captured_amount FROM orders WHERE id = $1`, id); got != captured {
		e.T.Errorf("order %d captured %d, its paid installments add up to %d", id, got, captured)
	}
}

// failWrites makes every insert or update of table fail, as a full disk or a lost
// connection would fail one statement in the middle.
func (e *installmentEnv) failWrites(table string) {
	e.T.Helper()
	for _, s := range []string{
		`CREATE OR REPLACE FUNCTION test_fail_write() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN RAISE EXCEPTION 'test: write to % refused', TG_TABLE_NAME; END $$`,
		`CREATE TRIGGER test_fail_write BEFORE INSERT OR UPDATE ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION test_fail_write()`,
	} {
		if _, err := e.DB.Exec(s); err != nil {
			e.T.Fatal(err)
		}
	}
}

func (e *installmentEnv) allowWrites(table string) {
	e.T.Helper()
	if _, err := e.DB.Exec(`DROP TRIGGER test_fail_write ON ` + table); err != nil {
		e.T.Fatal(err)
	}
}

// eventStep is a step of a test and the events it must add, by type.
type eventStep struct {
	name string
	do   func()
	want map[string]int64 // events added by the step
}

// checkEventSteps runs the steps in order from the event counts have, checking after each
// that it added exactly its events, and at the end that every event is queued for dispatch once.
func (e *installmentEnv) checkEventSteps(have map[string]int64, steps []eventStep) {
	e.T.Helper()
	for _, s := range steps {
		s.do()
		want := maps.Clone(have)
		for typ, n := range s.want {
			want[typ] += n
		}
		got := e.eventCounts()
		if !maps.Equal(got, want) {
			e.T.Fatalf("after %q: events %v, want %v", s.name, got, want)
		}
		have = got
	}
	// Nothing dispatches here (the app's background work is not running): every event waits
	// in the queue, once.
	if n := e.Count(`SELECT count(*) FROM outbox_events ev
		 WHERE (SELECT count(*) FROM outbox_queue q WHERE q.event_id = ev.id) <> 1`); n != 0 {
		e.T.Errorf("%d events not queued for dispatch exactly once", n)
	}
	if n := e.Count(`SELECT count(*) FROM outbox_queue q WHERE NOT EXISTS (SELECT 1 FROM outbox_events ev WHERE ev.id = q.event_id)`); n != 0 {
		e.T.Errorf("%d queued dispatches without their event", n)
	}
}

// eventCounts counts the client's events by type.
func (e *installmentEnv) eventCounts() map[string]int64 {
	e.T.Helper()
	rows, err := e.DB.Query(`SELECT type, count(*) FROM outbox_events WHERE client_id = $1 GROUP BY type`, e.Client.ID)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var typ string
		var n int64
		if err := rows.Scan(&typ, &n); err != nil {
			e.T.Fatal(err)
		}
		out[typ] = n
	}
	if err := rows.Err(); err != nil {
		e.T.Fatal(err)
	}
	return out
}
