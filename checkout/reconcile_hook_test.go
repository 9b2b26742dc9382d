package checkout_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/reconcile"
)

// The package's tests reconcile through checkout.ReconcileForTest (see there).
func init() {
	checkout.ReconcileForTest = func(db *sqlx.DB, p psp.Provider, s *checkout.Service, now func() time.Time,
		since, until time.Time, pageSize int) (checkout.Reconciled, error) {
		r := reconcile.New(db, p, s, reconcile.Config{PageSize: pageSize, Now: now}, slog.New(slog.DiscardHandler))
		res, err := r.Run(context.Background(), since, until)
		return checkout.Reconciled{ChargesSeen: res.ChargesSeen, Pending: res.Pending, Orphans: res.Orphans,
			CompensationsCreated: res.CompensationsCreated, RefundsMade: res.RefundsMade, Mismatches: res.Mismatches,
			PaidWithoutCharge: res.PaidWithoutCharge}, err
	}
}
