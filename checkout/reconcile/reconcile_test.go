package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
)

// actionEnv is the shared environment (checkouttest.Env) paying on the sandbox behind a
// switch, and the reconcilers of its charges.
type actionEnv struct{ *checkouttest.Env }

func newActionEnv(t *testing.T) *actionEnv {
	t.Helper()
	return &actionEnv{checkouttest.New(t, checkouttest.Options{Switch: true})}
}

// reconciler is a reconciler of e's charges, as the app makes it.
func (e *actionEnv) reconciler(cfg Config) *Reconciler {
	cfg.Now = e.Now
	return New(e.DB, e.Switch, e.Service, cfg, slog.New(slog.DiscardHandler))
}

// canceledOrder leaves the order of key canceled before its charge was made (the provider
// was unreachable, and the order was canceled meanwhile with no refund owed) and returns the
// key row that created it.
func (e *actionEnv) canceledOrder(key string) *checkout.Key {
	e.T.Helper()
	e.Switch.Set("down")
	_, status := e.Order(key, psp.TokenVisa, 2500)
	e.Switch.Set("")
	if status != http.StatusServiceUnavailable {
		e.T.Fatalf("order %s with the provider down: %d", key, status)
	}
	var k checkout.Key
	if err := e.DB.Get(&k, `SELECT id, client_id, key, order_id, created_at, intent FROM idempotency_keys
		WHERE client_id = $1 AND key = $2`, e.Client.ID, key); err != nil {
		e.T.Fatal(err)
	}
	if _, err := e.DB.Exec(`UPDATE orders SET status = 'canceled' WHERE id = $1`, k.OrderID.Int64); err != nil {
		e.T.Fatal(err)
	}
	return &k
}

// orphanCharge charges the sandbox directly under key, as a charge tekrar never completed
// (psptest.Charge), and returns it.
func (e *actionEnv) orphanCharge(key, description string, amount int64) psp.Charge {
	e.T.Helper()
	return psptest.Charge(e.T, e.Switch, key, description, amount)
}

// reconcile runs one reconciliation of the last hour, with small pages so that the walk
// crosses pages.
func (e *actionEnv) reconcile() Result {
	e.T.Helper()
	res, err := e.reconciler(Config{PageSize: 2}).Run(context.Background(), time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
	if err != nil {
		e.T.Fatalf("reconcile: %v", err)
	}
	return res
}

// ledgerOfOrphan is what tekrar and the provider hold about an orphan charge.
type ledgerOfOrphan struct {
	Refunds       int64 // at the provider
	RefundedTotal int64 // at the provider
	Compensations int64
	Refunded      int64 // compensations settled refunded
	Audits        int64
	Findings      int64
}

func (e *actionEnv) orphanLedger(ch psp.Charge) ledgerOfOrphan {
	e.T.Helper()
	return ledgerOfOrphan{
		Refunds:       e.Count(`SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, ch.ID),
		RefundedTotal: e.Count(`SELECT coalesce(sum(amount), 0) FROM psp_refunds WHERE charge_id = $1`, ch.ID),
		Compensations: e.Count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND source = 'reconcile'`, ch.Key),
		Refunded:      e.Count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND state = 'refunded' AND refund_id IS NOT NULL`, ch.Key),
		Audits:        e.Count(`SELECT count(*) FROM audit_log WHERE target = $1 AND actor IS NOT NULL`, "charge:"+ch.ID),
		Findings:      e.Count(`SELECT count(*) FROM reconciliation_findings WHERE charge_id = $1 AND kind = 'orphan_charge'`, ch.ID),
	}
}

// TestReconcileFindsWhatDisagrees puts one of each disagreement between tekrar and the
// provider in a window, with an order that agrees and one still completing, and runs
// reconciliation twice: the first run finds each, refunds each orphan charge in full once,
// records and audits it; the second adds no row and refunds nothing.
func TestReconcileFindsWhatDisagrees(t *testing.T) {
	e := newActionEnv(t)
	if _, status := e.Order("k-paid", "tok_visa", 2500); status != http.StatusCreated {
		t.Fatalf("paid order: %d", status)
	}
	// A pending order whose charge was made but whose answer was lost: it can still complete.
	e.Switch.Set("lost")
	if _, status := e.Order("k-pending", "tok_visa", 1500); status == http.StatusCreated {
		t.Fatalf("pending order: %d", status)
	}
	e.Switch.Set("")

	// Orphans: a charge made by hand at the provider; one naming an order tekrar does not
	// have; and the late charge of an order canceled meanwhile, under the order's own key.
	byHand := e.orphanCharge("by-hand-1", "refund me", 700)
	noOrder := e.orphanCharge("no-order-1", "order 987654", 800) // as checkout describes a charge of order 987654
	canceledKey := e.canceledOrder("k-canceled")
	late := e.orphanCharge(checkout.ChargeKey(canceledKey), fmt.Sprint("order ", canceledKey.OrderID.Int64), 2500)

	// An amount tekrar recorded differently from the provider.
	mismatchID, status := e.Order("k-mismatch", "tok_visa", 3000)
	if status != http.StatusCreated {
		t.Fatalf("mismatch order: %d", status)
	}
	if _, err := e.DB.Exec(`UPDATE payments SET amount = 3001 WHERE order_id = (SELECT id FROM orders WHERE public_id = $1)`, mismatchID); err != nil {
		t.Fatal(err)
	}
	// An order recorded paid whose charge the provider does not have.
	if _, err := e.DB.Exec(`
		WITH o AS (
		    INSERT INTO orders (client_id, status, amount, currency, items, captured_amount, created_at, updated_at)
		    VALUES ($1, 'paid', 900, 'TRY', '[]', 900, now(), now()) RETURNING id)
		INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status, created_at)
		SELECT id, 'ch_nowhere', 'tekrar_ch_nowhere', 900, 'TRY', 'succeeded', now() FROM o`, e.Client.ID); err != nil {
		t.Fatal(err)
	}

	res := e.reconcile()
	want := Result{RunID: res.RunID, ChargesSeen: 6, Pending: 1, Orphans: 3, CompensationsCreated: 3, RefundsMade: 3,
		Mismatches: 1, PaidWithoutCharge: 1}
	if res != want {
		t.Errorf("first run: %+v\nwant        %+v", res, want)
	}
	for _, ch := range []psp.Charge{byHand, noOrder, late} {
		got := e.orphanLedger(ch)
		if got != (ledgerOfOrphan{Refunds: 1, RefundedTotal: ch.Amount, Compensations: 1, Refunded: 1, Audits: 1, Findings: 1}) {
			t.Errorf("orphan %s (%s): %+v", ch.ID, ch.Key, got)
		}
	}
	// The late charge's compensation is its order's: the order's page shows it.
	if n := e.Count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND order_id = $2`, late.Key, canceledKey.OrderID.Int64); n != 1 {
		t.Error("the late charge's compensation does not name its order")
	}
	// Its client is told, once (docs/outbox.md); charges of no order tell no one.
	if n := e.Count(`SELECT count(*) FROM outbox_events WHERE type = 'compensation.created' AND order_id = $1`, canceledKey.OrderID.Int64); n != 1 {
		t.Errorf("%d compensation.created events of the late charge's order, want 1", n)
	}
	if n := e.Count(`SELECT count(*) FROM compensations WHERE charge_key IN ($1, $2) AND order_id IS NULL AND client_id IS NULL`, byHand.Key, noOrder.Key); n != 2 {
		t.Errorf("%d compensations of charges with no order have none, want 2", n)
	}
	kinds := map[string]int64{}
	for _, k := range []string{"orphan_charge", "amount_mismatch", "paid_without_charge"} {
		kinds[k] = e.Count(`SELECT count(*) FROM reconciliation_findings WHERE kind = $1`, k)
	}
	if kinds["orphan_charge"] != 3 || kinds["amount_mismatch"] != 1 || kinds["paid_without_charge"] != 1 {
		t.Errorf("findings %v", kinds)
	}
	if n := e.Count(`SELECT count(*) FROM reconciliation_findings WHERE kind = 'paid_without_charge' AND charge_id = 'ch_nowhere'`); n != 1 {
		t.Error("the order paid with no charge is not the finding")
	}
	if n := e.Count(`SELECT count(*) FROM reconciliation_runs WHERE id = $1 AND finished_at IS NOT NULL AND error IS NULL
		AND charges_seen = 6 AND orphans = 3 AND compensations_created = 3 AND refunds_made = 3`, res.RunID); n != 1 {
		t.Error("the run is not recorded with its counts")
	}

	// A rerun: the same findings, nothing new written, nothing refunded again.
	rows := func() [5]int64 {
		return [5]int64{e.Count(`SELECT count(*) FROM reconciliation_findings`), e.Count(`SELECT count(*) FROM compensations`),
			e.Count(`SELECT count(*) FROM audit_log`), e.Count(`SELECT count(*) FROM psp_refunds`), e.Count(`SELECT count(*) FROM outbox_events`)}
	}
	before := rows()
	again := e.reconcile()
	want = Result{RunID: again.RunID, ChargesSeen: 6, Pending: 1, Orphans: 3, Mismatches: 1, PaidWithoutCharge: 1}
	if again != want {
		t.Errorf("rerun: %+v\nwant   %+v", again, want)
	}
	if after := rows(); after != before {
		t.Errorf("the rerun wrote rows (findings, compensations, audit, provider refunds, events): %v, before %v", after, before)
	}
	if n := e.Count(`SELECT count(*) FROM reconciliation_findings WHERE last_run_id = $1`, again.RunID); n != 5 {
		t.Errorf("the rerun saw %d findings again, want 5", n)
	}
}

// TestConcurrentReconcilesRefundEachOrphanOnce runs several reconciliations of the same
// window at once over orphan charges: each charge gets one compensation, one audit entry
// and one refund at the provider, whoever wins each race.
func TestConcurrentReconcilesRefundEachOrphanOnce(t *testing.T) {
	e := newActionEnv(t)
	var orphans []psp.Charge
	for i := range 12 {
		orphans = append(orphans, e.orphanCharge(fmt.Sprintf("stray-%d", i), "a charge of no order", int64(100+i)))
	}
	const runs = 4
	var wg sync.WaitGroup
	results := make([]Result, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.reconciler(Config{PageSize: 5}).Run(context.Background(), time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
		}()
	}
	wg.Wait()
	created, refunded := 0, 0
	for i := range runs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		created += results[i].CompensationsCreated
		refunded += results[i].RefundsMade
	}
	if created != len(orphans) {
		t.Errorf("the runs created %d compensations together, want %d", created, len(orphans))
	}
	for _, ch := range orphans {
		if got := e.orphanLedger(ch); got != (ledgerOfOrphan{Refunds: 1, RefundedTotal: ch.Amount, Compensations: 1, Refunded: 1, Audits: 1, Findings: 1}) {
			t.Errorf("orphan %s: %+v", ch.Key, got)
		}
	}
}

// TestListAnswers: the rows of the charge listing's table of provider answers
// (docs/providers.md), through a run: a listing that fails fails the run, which is recorded
// as failed.
func TestListAnswers(t *testing.T) {
	for _, tc := range []struct {
		err  error
		fail bool
	}{{nil, false}, {psp.ErrNotFound, true}, {errors.New("connection reset"), true}} {
		t.Run(fmt.Sprint("list ", tc.err), func(t *testing.T) {
			e := newActionEnv(t)
			ap := &psptest.Answering{Provider: e.Switch.Provider}
			e.Switch.Provider = ap
			ap.Force(psptest.OpListCharges, tc.err)
			_, err := e.reconciler(Config{}).Run(context.Background(), e.Now().Add(-time.Hour), e.Now().Add(time.Minute))
			if (err != nil) != tc.fail {
				t.Fatalf("reconcile: %v, want failed %v", err, tc.fail)
			}
			if n := e.Count(`SELECT count(*) FROM reconciliation_runs WHERE finished_at IS NOT NULL AND (error IS NOT NULL) = $1`, tc.fail); n != 1 {
				t.Errorf("the run is not recorded as failed %v", tc.fail)
			}
		})
	}
}

// TestAnOrphanChargeNamesOnlyItsOwnOrder: reconciliation finds a charge's order by the
// public id its description names, and by an old description's internal id only when the
// charge was made under that order's key: after a failover or a restore the same id may be
// another order's, which the orphan's finding and refund must not name.
func TestAnOrphanChargeNamesOnlyItsOwnOrder(t *testing.T) {
	e := newActionEnv(t)
	// The late charge of an order canceled meanwhile, described as checkout describes it now.
	canceledKey := e.canceledOrder("k-canceled")
	var public string
	if err := e.DB.Get(&public, `SELECT public_id FROM orders WHERE id = $1`, canceledKey.OrderID.Int64); err != nil {
		t.Fatal(err)
	}
	late := e.orphanCharge(checkout.ChargeKey(canceledKey), "order "+public, 2500)
	// A paid order, and a charge of an order lost in a failover whose internal id it took.
	paid, status := e.Order("k-paid", "tok_visa", 900)
	if status != http.StatusCreated {
		t.Fatalf("paid order: %d", status)
	}
	var paidID int64
	if err := e.DB.Get(&paidID, `SELECT id FROM orders WHERE public_id = $1`, paid); err != nil {
		t.Fatal(err)
	}
	stray := e.orphanCharge("tekrar_ch_00112233445566778899aabbccddeeff", fmt.Sprint("order ", paidID), 700)

	if res := e.reconcile(); res.Orphans != 2 || res.RefundsMade != 2 {
		t.Fatalf("reconcile: %+v, want 2 orphans refunded", res)
	}
	if n := e.Count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND order_id = $2`, late.Key, canceledKey.OrderID.Int64); n != 1 {
		t.Error("the late charge, described by its order's public id, is not its order's compensation")
	}
	if n := e.Count(`SELECT count(*) FROM reconciliation_findings WHERE charge_id = $1 AND order_id IS NULL`, stray.ID); n != 1 {
		t.Error("the stray charge's finding names the order that took the lost order's internal id")
	}
	if n := e.Count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND order_id IS NULL AND client_id IS NULL`, stray.Key); n != 1 {
		t.Error("the stray charge's compensation names an order or client")
	}
	if n := e.Count(`SELECT count(*) FROM orders WHERE id = $1 AND status = 'paid' AND refunded_amount = 0`, paidID); n != 1 {
		t.Error("the order that took the lost order's internal id was touched")
	}
}
