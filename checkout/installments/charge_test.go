package installments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/reconcile"
)

// TestInstallmentRetryDays: a declined installment is tried again 1, 3 and 7 days after its
// due date, when those days start in the client's zone, then goes to an operator; a run that
// is late does not spend the next retry at once.
func TestInstallmentRetryDays(t *testing.T) {
	t.Parallel()
	ist := checkouttest.Location(t, "Europe/Istanbul")
	due := calendar.Day{Year: 2027, Month: time.February, Day: 28}
	cases := []struct {
		attempts int
		now      string
		want     string // "" for an operator
	}{
		{1, "2027-02-27T21:00:00Z", "2027-02-28T21:00:00Z"}, // due+1: Mar 1 starts in Istanbul
		{2, "2027-02-28T21:00:00Z", "2027-03-02T21:00:00Z"}, // due+3: Mar 3
		{3, "2027-03-02T21:00:00Z", "2027-03-06T21:00:00Z"}, // due+7: Mar 7
		{4, "2027-03-06T21:00:00Z", ""},
		{1, "2027-03-10T12:00:00Z", "2027-03-10T21:00:00Z"}, // late: the day after now, not at once
	}
	for _, tc := range cases {
		got, ok := nextInstallmentAttempt(due, tc.attempts, checkouttest.UTC(tc.now), ist)
		switch {
		case tc.want == "" && ok:
			t.Errorf("after %d attempts: retry at %s, want an operator", tc.attempts, got)
		case tc.want != "" && (!ok || !got.Equal(checkouttest.UTC(tc.want))):
			t.Errorf("after %d attempts at %s: retry at %s (%v), want %s", tc.attempts, tc.now, got.UTC(), ok, tc.want)
		}
	}
}

// TestInstallmentsChargedOnTheirDueDay: a client in Istanbul (UTC+3) whose order of Jan 31
// late evening is paid in 3: the first with the order, the second as Feb 28 starts there
// (21:00 UTC on Feb 27, not a second before), the third on Mar 31. A rerun charges nothing.
func TestInstallmentsChargedOnTheirDueDay(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "Europe/Istanbul", checkouttest.UTC("2027-01-31T20:30:00Z")) // 23:30 in Istanbul
	_, id := e.Plan("k-sofa", 1000, 3)
	if got := e.Count(`SELECT amount FROM payments WHERE order_id = $1`, id); got != 334 {
		t.Errorf("the order's charge took %d, want the first installment's 334", got)
	}
	steps := []struct {
		at      string
		charged int
	}{
		{"2027-02-27T20:59:59Z", 0}, // Feb 27, 23:59:59 in Istanbul
		{"2027-02-27T21:00:00Z", 1}, // Feb 28 starts
		{"2027-02-27T21:00:00Z", 0}, // a rerun
		{"2027-03-30T20:59:59Z", 0},
		{"2027-03-30T21:00:00Z", 1}, // Mar 31
		{"2027-06-01T00:00:00Z", 0},
	}
	for _, s := range steps {
		if res := e.run(s.at); res.Charged != s.charged {
			t.Errorf("run at %s: %+v, want %d charged", s.at, res, s.charged)
		}
	}
	e.ledgerAgrees(id)
	if got := e.Text(`SELECT string_agg(n || ' ' || status || ' ' || due_on, ', ' ORDER BY n) FROM installments WHERE order_id = $1`, id); got != "1 paid 2027-01-31, 2 paid 2027-02-28, 3 paid 2027-03-31" {
		t.Errorf("installments: %s", got)
	}
	if got := e.Count(`SELECT captured_amount FROM orders WHERE id = $1`, id); got != 1000 {
		t.Errorf("captured %d, want the whole 1000", got)
	}
}

// TestInstallmentJobOnManyReplicasAtOnce: four services (as four processes would) run the
// job at the same instant over 30 due installments: each is charged once at the provider and
// recorded once, and the provider's ledger and tekrar's agree.
func TestInstallmentJobOnManyReplicasAtOnce(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "Europe/Berlin", checkouttest.UTC("2027-03-10T09:00:00Z"))
	const orders = 15
	ids := make([]int64, orders)
	for i := range ids {
		_, ids[i] = e.Plan(fmt.Sprintf("k-%d", i), int64(900+i), 3)
	}
	replicas := make([]*Charger, 4)
	for i := range replicas {
		replicas[i] = e.charger()
	}
	var wg sync.WaitGroup
	results := make([]Result, len(replicas))
	for i, s := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], err = s.run(context.Background(), checkouttest.UTC("2027-05-10T00:00:00Z"))
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, r := range results {
		total += r.Charged
	}
	if total != 2*orders {
		t.Errorf("the replicas charged %d installments (%+v), want %d", total, results, 2*orders)
	}
	for _, id := range ids {
		e.ledgerAgrees(id)
	}
	if n := e.Count(`SELECT count(*) FROM psp_charges`); n != 3*orders {
		t.Errorf("the provider holds %d charges, want %d", n, 3*orders)
	}
}

// TestFrozenInstallmentRunWritesNothing: a run takes an installment and freezes before it
// calls the provider; its lease lapses, another run takes the installment over and records
// its charge. The frozen run wakes and charges: the provider answers with the same charge
// (the same derived key), and its record matches no row (the lease token moved on).
func TestFrozenInstallmentRunWritesNothing(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "UTC", checkouttest.UTC("2027-01-15T09:00:00Z"))
	_, id := e.Plan("k-frozen", 600, 2)
	at := checkouttest.UTC("2027-02-15T00:00:00Z")
	frozen, err := e.c.claimInstallment(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	e.Advance(e.c.cfg.Lease + time.Second)
	// The other run takes it over: the attempt was in flight, so it looks it up first.
	taker, err := e.c.claimInstallment(context.Background(), at)
	if err != nil {
		t.Fatalf("take over after the lease: %v", err)
	}
	if !taker.Resumed || taker.Key != frozen.Key || taker.LeaseToken == frozen.LeaseToken {
		t.Errorf("takeover %+v of %+v: want the same attempt and key under a new token", taker, frozen)
	}
	var res Result
	if err := e.c.chargeInstallment(context.Background(), frozen, at, &res); err != nil {
		t.Fatal(err)
	}
	if res.Fenced != 1 || res.Charged != 0 {
		t.Errorf("the woken run recorded %+v, want only fenced", res)
	}
	if got := e.Text(`SELECT status FROM installments WHERE order_id = $1 AND n = 2`, id); got != "scheduled" {
		t.Errorf("the woken run's charge was recorded: installment is %s", got)
	}
	res = Result{}
	if err := e.c.chargeInstallment(context.Background(), taker, at, &res); err != nil {
		t.Fatal(err)
	}
	if res.Charged != 1 {
		t.Errorf("the taker recorded %+v, want charged", res)
	}
	if n := e.Count(`SELECT count(*) FROM psp_charges WHERE description = $1`, checkout.InstallmentDescription(e.publicID(id), 2)); n != 1 {
		t.Errorf("the provider made %d charges of installment 2, want 1", n)
	}
	e.ledgerAgrees(id)
}

// TestDeclinedInstallmentRetriesThenOperator: the saved card declines from the second
// installment on: it is tried on its due day and 1, 3 and 7 days later (each under a new
// key), then waits for an operator. A second order's card is replaced after one decline and
// its retry pays.
func TestDeclinedInstallmentRetriesThenOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInstallmentEnv(t, "America/New_York", checkouttest.UTC("2027-10-07T15:00:00Z"))
	_, id := e.Plan("k-declines", 2000, 2)
	if err := e.Sandbox.ReplacePaymentMethodCard(ctx, e.Card.ID, psp.TokenDeclined); err != nil {
		t.Fatal(err)
	}
	// Due Nov 7, the day New York leaves summer time: it starts at 04:00 UTC.
	steps := []struct {
		at              string
		retry, operator int
		status          string
	}{
		{"2027-11-07T03:59:59Z", 0, 0, "scheduled"},
		{"2027-11-07T04:00:00Z", 1, 0, "scheduled"},
		{"2027-11-08T04:59:59Z", 0, 0, "scheduled"}, // Nov 8 starts at 05:00 UTC (EST)
		{"2027-11-08T05:00:00Z", 1, 0, "scheduled"},
		{"2027-11-10T05:00:00Z", 1, 0, "scheduled"},
		{"2027-11-14T05:00:00Z", 0, 1, "attention"},
		{"2027-12-31T05:00:00Z", 0, 0, "attention"},
	}
	for _, s := range steps {
		res := e.run(s.at)
		if res.Retry != s.retry || res.Attention != s.operator {
			t.Errorf("run at %s: %+v, want %d retried, %d to an operator", s.at, res, s.retry, s.operator)
		}
		if got := e.Text(`SELECT status FROM installments WHERE order_id = $1 AND n = 2`, id); got != s.status {
			t.Errorf("after %s: installment is %s, want %s", s.at, got, s.status)
		}
	}
	if n := e.Count(`SELECT count(DISTINCT key) FROM psp_charges WHERE description = $1 AND status = 'declined'`, checkout.InstallmentDescription(e.publicID(id), 2)); n != 4 {
		t.Errorf("%d declined attempts at the provider, want 4 under 4 keys", n)
	}
	e.ledgerAgrees(id)

	// A new card after the first decline: the retry pays.
	if err := e.Sandbox.ReplacePaymentMethodCard(ctx, e.Card.ID, psp.TokenVisa); err != nil {
		t.Fatal(err)
	}
	e.Set(checkouttest.UTC("2028-01-05T15:00:00Z"))
	_, id2 := e.Plan("k-new-card", 2000, 2)
	if err := e.Sandbox.ReplacePaymentMethodCard(ctx, e.Card.ID, psp.TokenDeclined); err != nil {
		t.Fatal(err)
	}
	e.run("2028-02-05T05:00:00Z")
	if err := e.Sandbox.ReplacePaymentMethodCard(ctx, e.Card.ID, psp.TokenMastercard); err != nil {
		t.Fatal(err)
	}
	if res := e.run("2028-02-06T05:00:00Z"); res.Charged != 1 {
		t.Errorf("retry on the new card: %+v", res)
	}
	if got := e.Count(`SELECT attempts FROM installments WHERE order_id = $1 AND n = 2 AND status = 'paid'`, id2); got != 2 {
		t.Errorf("paid on attempt %d, want 2", got)
	}
	e.ledgerAgrees(id2)
}

// TestRefundCancelsUnpaidInstallments: a refund cancels the unpaid installments in its own
// transaction, so no later run charges them; while an installment's charge is in flight the
// refund is refused (409 installment_in_flight) and nothing is stored.
func TestRefundCancelsUnpaidInstallments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInstallmentEnv(t, "UTC", checkouttest.UTC("2027-01-15T09:00:00Z"))
	pub, id := e.Plan("k-refund", 1200, 4)
	e.run("2027-02-15T00:00:00Z")

	// Installment 3 in flight: a run took it and has not recorded its outcome.
	c, err := e.c.claimInstallment(ctx, checkouttest.UTC("2027-03-15T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	if status := e.Refund("r-early", pub, 100); status != http.StatusConflict {
		t.Errorf("refund while an installment is charged: %d, want 409", status)
	}
	if n := e.Count(`SELECT count(*) FROM refunds WHERE order_id = $1`, id); n != 0 {
		t.Errorf("the refused refund stored %d refunds", n)
	}
	var res Result
	if err := e.c.chargeInstallment(ctx, c, checkouttest.UTC("2027-03-15T00:00:00Z"), &res); err != nil || res.Charged != 1 {
		t.Fatalf("charge installment 3: %+v %v", res, err)
	}

	if status := e.Refund("r-1", pub, 100); status != http.StatusCreated {
		t.Fatalf("refund: %d", status)
	}
	if got := e.Text(`SELECT string_agg(n || ' ' || status, ', ' ORDER BY n) FROM installments WHERE order_id = $1`, id); got != "1 paid, 2 paid, 3 paid, 4 canceled" {
		t.Errorf("after the refund: %s", got)
	}
	if res := e.run("2027-12-31T00:00:00Z"); res.Charged != 0 {
		t.Errorf("a run after the refund charged %+v", res)
	}
	e.ledgerAgrees(id)
	// The refund is made from the first installment's charge: no more than it.
	if status := e.Refund("r-2", pub, 300); status != http.StatusConflict {
		t.Errorf("refund beyond the first installment: %d, want 409", status)
	}
}

// TestReconcileKnowsInstallmentCharges: reconciliation meets the charges of installments —
// paid, and one made at the provider whose run died before recording it — and finds no
// orphan and no mismatch, so refunds nothing; the rerun then records the charge.
func TestReconcileKnowsInstallmentCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInstallmentEnv(t, "UTC", time.Now().UTC().Truncate(time.Microsecond).AddDate(0, 0, -2))
	_, id := e.Plan("k-reco", 1000, 3)
	e.run(e.Now().AddDate(0, 1, 1).Format(time.RFC3339))
	// Installment 3: charged at the provider, the run dead before it recorded it.
	at := e.Now().AddDate(0, 2, 1)
	c, err := e.c.claimInstallment(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sandbox.Charge(ctx, psp.ChargeRequest{Key: c.Key, Amount: c.Amount, Currency: c.Currency,
		Customer: c.ProviderCustomer.String, PaymentMethod: c.PaymentMethod.String, Description: checkout.InstallmentDescription(e.publicID(id), 3)}); err != nil {
		t.Fatal(err)
	}
	rc := reconcile.New(e.DB, e.Sandbox, e.Service, reconcile.Config{PageSize: 2, Now: e.Now}, slog.New(slog.DiscardHandler))
	res, err := rc.Run(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if res.Orphans != 0 || res.Mismatches != 0 || res.RefundsMade != 0 || res.ChargesSeen != 3 {
		t.Errorf("reconcile: %+v, want 3 charges seen and nothing wrong", res)
	}
	e.Advance(e.c.cfg.Lease + time.Second)
	if r := e.run(at.Format(time.RFC3339)); r.Charged != 1 {
		t.Errorf("the rerun: %+v, want the charge recorded", r)
	}
	if n := e.Count(`SELECT count(*) FROM psp_charges`); n != 3 {
		t.Errorf("the provider holds %d charges, want 3", n)
	}
	e.ledgerAgrees(id)
}

// TestACanceledInstallmentRecordsNothing: an installment canceled while its charge was in
// flight (a refund made at the provider's dashboard cancels the plan whatever is in flight)
// takes no outcome from its holder: the paid record matches no row, and no later run
// charges it.
func TestACanceledInstallmentRecordsNothing(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "UTC", checkouttest.UTC("2027-01-10T09:00:00Z"))
	_, id := e.Plan("k-plan", 900, 3)
	if _, err := e.DB.Exec(`UPDATE installments SET in_flight = true, attempts = 1, lease_token = 7,
	    lease_expires_at = '2027-01-11T10:00:00Z' WHERE order_id = $1 AND n = 2`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(`UPDATE installments SET status = 'canceled', next_attempt_at = NULL
	     WHERE order_id = $1 AND status = 'scheduled'`, id); err != nil {
		t.Fatal(err)
	}
	var recorded int64
	if err := e.DB.Get(&recorded, installmentPaidSQL, id, 2, 7, "ch_late", checkouttest.UTC("2027-01-11T09:30:00Z")); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("the in-flight installment's holder recorded its charge after the plan was canceled: %v", err)
	}
	if res := e.run("2027-04-01T00:00:00Z"); res.Charged != 0 {
		t.Fatalf("the job charged a canceled plan: %+v", res)
	}
}
