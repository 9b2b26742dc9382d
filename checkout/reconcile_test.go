package checkout

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
)

// orphanCharge charges the sandbox directly under key, as a charge tekrar never completed
// (made by hand at the provider, or by a client of another system) and returns it.
func (e *actionEnv) orphanCharge(key, description string, amount int64) psp.Charge {
	e.t.Helper()
	ch, err := e.p.Charge(context.Background(), psp.ChargeRequest{Key: key, Amount: amount, Currency: "TRY",
		CardToken: psp.TokenVisa, Description: description})
	if err != nil || ch.Status != psp.StatusSucceeded {
		e.t.Fatalf("charge %s: %+v %v", key, ch, err)
	}
	return ch
}

// reconcile runs one reconciliation of the last hour, with small pages so that the walk
// crosses pages.
func (e *actionEnv) reconcile() ReconcileResult {
	e.t.Helper()
	res, err := e.s.Reconcile(context.Background(), time.Now().Add(-time.Hour), time.Now().Add(time.Minute), ReconcileOptions{PageSize: 2})
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
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
	e.t.Helper()
	return ledgerOfOrphan{
		Refunds:       e.count(`SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, ch.ID),
		RefundedTotal: e.count(`SELECT coalesce(sum(amount), 0) FROM psp_refunds WHERE charge_id = $1`, ch.ID),
		Compensations: e.count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND source = 'reconcile'`, ch.Key),
		Refunded:      e.count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND state = 'refunded' AND refund_id IS NOT NULL`, ch.Key),
		Audits:        e.count(`SELECT count(*) FROM audit_log WHERE target = $1 AND actor IS NOT NULL`, "charge:"+ch.ID),
		Findings:      e.count(`SELECT count(*) FROM reconciliation_findings WHERE charge_id = $1 AND kind = 'orphan_charge'`, ch.ID),
	}
}

// TestReconcileFindsWhatDisagrees puts one of each disagreement between tekrar and the
// provider in a window, with an order that agrees and one still completing, and runs
// reconciliation twice: the first run finds each, refunds each orphan charge in full once,
// records and audits it; the second adds no row and refunds nothing.
func TestReconcileFindsWhatDisagrees(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	if _, status := e.order("k-paid", "tok_visa", 2500); status != http.StatusCreated {
		t.Fatalf("paid order: %d", status)
	}
	// A pending order whose charge was made but whose answer was lost: it can still complete.
	e.p.set("lost")
	if _, status := e.order("k-pending", "tok_visa", 1500); status == http.StatusCreated {
		t.Fatalf("pending order: %d", status)
	}
	e.p.set("")

	// Orphans: a charge made by hand at the provider; one naming an order tekrar does not
	// have; and the late charge of an order canceled meanwhile, under the order's own key.
	byHand := e.orphanCharge("by-hand-1", "refund me", 700)
	noOrder := e.orphanCharge("no-order-1", chargeDescription(987654), 800)
	canceledKey := e.openKey("k-canceled", "")
	if _, err := cancelOrder(ctx, e.s.q, canceledKey, e.now, nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	late := e.orphanCharge(providerKey("charge", canceledKey), chargeDescription(canceledKey.OrderID.Int64), 2500)

	// An amount tekrar recorded differently from the provider.
	mismatchID, status := e.order("k-mismatch", "tok_visa", 3000)
	if status != http.StatusCreated {
		t.Fatalf("mismatch order: %d", status)
	}
	if _, err := e.db.Exec(`UPDATE payments SET amount = 3001 WHERE order_id = (SELECT id FROM orders WHERE public_id = $1)`, mismatchID); err != nil {
		t.Fatal(err)
	}
	// An order recorded paid whose charge the provider does not have.
	if _, err := e.db.Exec(`
		WITH o AS (
		    INSERT INTO orders (client_id, status, amount, currency, items, captured_amount, created_at, updated_at)
		    VALUES ($1, 'paid', 900, 'TRY', '[]', 900, now(), now()) RETURNING id)
		INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status, created_at)
		SELECT id, 'ch_nowhere', 'tekrar_ch_nowhere', 900, 'TRY', 'succeeded', now() FROM o`, e.client.ID); err != nil {
		t.Fatal(err)
	}

	res := e.reconcile()
	want := ReconcileResult{RunID: res.RunID, ChargesSeen: 6, Pending: 1, Orphans: 3, CompensationsCreated: 3, RefundsMade: 3,
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
	if n := e.count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND order_id = $2`, late.Key, canceledKey.OrderID.Int64); n != 1 {
		t.Error("the late charge's compensation does not name its order")
	}
	// Its client is told, once (docs/outbox.md); charges of no order tell no one.
	if n := e.count(`SELECT count(*) FROM outbox_events WHERE type = 'compensation.created' AND order_id = $1`, canceledKey.OrderID.Int64); n != 1 {
		t.Errorf("%d compensation.created events of the late charge's order, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM compensations WHERE charge_key IN ($1, $2) AND order_id IS NULL AND client_id IS NULL`, byHand.Key, noOrder.Key); n != 2 {
		t.Errorf("%d compensations of charges with no order have none, want 2", n)
	}
	kinds := map[string]int64{}
	for _, k := range []string{"orphan_charge", "amount_mismatch", "paid_without_charge"} {
		kinds[k] = e.count(`SELECT count(*) FROM reconciliation_findings WHERE kind = $1`, k)
	}
	if kinds["orphan_charge"] != 3 || kinds["amount_mismatch"] != 1 || kinds["paid_without_charge"] != 1 {
		t.Errorf("findings %v", kinds)
	}
	if n := e.count(`SELECT count(*) FROM reconciliation_findings WHERE kind = 'paid_without_charge' AND charge_id = 'ch_nowhere'`); n != 1 {
		t.Error("the order paid with no charge is not the finding")
	}
	if n := e.count(`SELECT count(*) FROM reconciliation_runs WHERE id = $1 AND finished_at IS NOT NULL AND error IS NULL
		AND charges_seen = 6 AND orphans = 3 AND compensations_created = 3 AND refunds_made = 3`, res.RunID); n != 1 {
		t.Error("the run is not recorded with its counts")
	}

	// A rerun: the same findings, nothing new written, nothing refunded again.
	rows := func() [5]int64 {
		return [5]int64{e.count(`SELECT count(*) FROM reconciliation_findings`), e.count(`SELECT count(*) FROM compensations`),
			e.count(`SELECT count(*) FROM audit_log`), e.count(`SELECT count(*) FROM psp_refunds`), e.count(`SELECT count(*) FROM outbox_events`)}
	}
	before := rows()
	again := e.reconcile()
	want = ReconcileResult{RunID: again.RunID, ChargesSeen: 6, Pending: 1, Orphans: 3, Mismatches: 1, PaidWithoutCharge: 1}
	if again != want {
		t.Errorf("rerun: %+v\nwant   %+v", again, want)
	}
	if after := rows(); after != before {
		t.Errorf("the rerun wrote rows (findings, compensations, audit, provider refunds, events): %v, before %v", after, before)
	}
	if n := e.count(`SELECT count(*) FROM reconciliation_findings WHERE last_run_id = $1`, again.RunID); n != 5 {
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
	results := make([]ReconcileResult, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.s.Reconcile(context.Background(), time.Now().Add(-time.Hour), time.Now().Add(time.Minute),
				ReconcileOptions{PageSize: 5})
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
