package checkout_test

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/installments"
	"github.com/tekrar/tekrar/checkout/psp"
)

// The package's tests run the installment job through checkout.InstallmentRunForTest (see
// there).
func init() {
	checkout.InstallmentRunForTest = func(db *sqlx.DB, p psp.Provider, now func() time.Time, at time.Time) (int, error) {
		res, err := installments.New(db, p, installments.Config{Now: now}, nil).Run(context.Background(), at)
		return res.Charged, err
	}
}
