package checkout

import (
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
)

// Reconciled is what a reconciliation run found and did: the counts of reconcile.Result.
type Reconciled struct {
	ChargesSeen, Pending, Orphans, CompensationsCreated, RefundsMade, Mismatches, PaidWithoutCharge int
}

// ReconcileForTest runs one reconciliation of [since, until) over s, whose database is db
// and provider p, as of now, listing pageSize charges at a time (0: the default). The
// package's tests may not import checkout/reconcile, which imports checkout:
// reconcile_hook_test.go, of the external test package, sets it.
var ReconcileForTest func(db *sqlx.DB, p psp.Provider, s *Service, now func() time.Time,
	since, until time.Time, pageSize int) (Reconciled, error)

// orphanCharge charges the sandbox directly under key, as a charge tekrar never completed
// (psptest.Charge), and returns it.
func (e *actionEnv) orphanCharge(key, description string, amount int64) psp.Charge {
	e.t.Helper()
	return psptest.Charge(e.t, e.p, key, description, amount)
}

// reconcile runs one reconciliation of the last hour, with small pages so that the walk
// crosses pages.
func (e *actionEnv) reconcile() Reconciled {
	e.t.Helper()
	res, err := ReconcileForTest(e.db, e.p, e.s, e.s.cfg.Now, time.Now().Add(-time.Hour), time.Now().Add(time.Minute), 2)
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// reconcileFindsNothing runs a reconciliation of the last hour and checks that it owes no
// refund: every charge of the provider is an order's.
func (e *actionEnv) reconcileFindsNothing() {
	e.t.Helper()
	now := e.s.cfg.Now()
	res, err := ReconcileForTest(e.db, e.p, e.s, e.s.cfg.Now, now.Add(-time.Hour), now.Add(time.Hour), 0)
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	if res.Orphans != 0 || res.CompensationsCreated != 0 || res.Mismatches != 0 || res.PaidWithoutCharge != 0 {
		e.t.Errorf("reconcile = %+v, want nothing found", res)
	}
	if n := e.count(`SELECT count(*) FROM compensations`); n != 0 {
		e.t.Errorf("%d compensations owed, want none", n)
	}
}
