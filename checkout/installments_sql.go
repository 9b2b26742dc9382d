package checkout

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// The statements of installment plans (installments.go). The claim of an order writes the
// plan's rows (claimOrderSQL) and its completion settles the first (completeOrderSQL); a
// refund's claim cancels the unpaid ones (cancelInstallmentsSQL). The charging of the later
// ones has its statements in package installments.

// lockOpenInstallmentsSQL locks the installments of order $1 of client $2 that a refund
// would cancel, and says whether a charge of one is in flight.
const lockOpenInstallmentsSQL = `
	SELECT i.in_flight
	  FROM installments i JOIN orders o ON o.id = i.order_id
	 WHERE o.public_id = $1 AND o.client_id = $2 AND i.status IN ('scheduled', 'attention')
	   FOR UPDATE OF i`

// cancelInstallmentsSQL cancels the unpaid installments of order $1 at $2.
const cancelInstallmentsSQL = `
	UPDATE installments
	   SET status = 'canceled', next_attempt_at = NULL, lease_expires_at = NULL, updated_at = $2
	 WHERE order_id = $1 AND status IN ('scheduled', 'attention') AND NOT in_flight`

// installmentRow is a row of installments as views read it.
type installmentRow struct {
	N           int            `db:"n"`
	Amount      int64          `db:"amount"`
	DueOn       time.Time      `db:"due_on"`
	Status      string         `db:"status"`
	Attempts    int            `db:"attempts"`
	InFlight    bool           `db:"in_flight"`
	NextAttempt sql.NullTime   `db:"next_attempt_at"`
	ChargeID    sql.NullString `db:"provider_charge_id"`
	DeclineCode sql.NullString `db:"decline_code"`
	PaidAt      sql.NullTime   `db:"paid_at"`
}

func loadInstallments(ctx context.Context, db sqlx.QueryerContext, orderID int64) ([]installmentRow, error) {
	var rows []installmentRow
	err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT n, amount, due_on, status, attempts, in_flight, next_attempt_at, provider_charge_id, decline_code, paid_at
		  FROM installments WHERE order_id = $1 ORDER BY n`, orderID)
	if err != nil {
		return nil, fmt.Errorf("read installments of order %d: %w", orderID, err)
	}
	return rows, nil
}

// lockInstallments locks the unpaid installments of the order a refund is claimed for,
// before the refund takes its amount: a run of the job cannot start an attempt on them until
// the refund's transaction ends, and the refund is refused while an attempt is in flight (its
// charge may be made; once its outcome is recorded, the refund may go ahead).
func lockInstallments(ctx context.Context, tx *sqlx.Tx, orderPublicID string, clientID int64) error {
	var inFlight []bool
	if err := tx.SelectContext(ctx, &inFlight, lockOpenInstallmentsSQL, orderPublicID, clientID); err != nil {
		return fmt.Errorf("lock the order's installments: %w", err)
	}
	for _, f := range inFlight {
		if f {
			return errInstallmentInFlight()
		}
	}
	return nil
}

// cancelInstallments cancels the unpaid installments of order id, in the refund's claim.
// An order paid in installments is refunded from its first installment's charge, so the
// refunds cannot exceed that charge (errExceedsFirstInstallment).
func cancelInstallments(ctx context.Context, tx *sqlx.Tx, orderID int64, now time.Time) error {
	var over bool
	err := tx.GetContext(ctx, &over, `
		SELECT o.installments > 1 AND o.refunded_amount > p.amount
		  FROM orders o JOIN payments p ON p.order_id = o.id WHERE o.id = $1`, orderID)
	if err != nil {
		return fmt.Errorf("check the refund against the first installment: %w", err)
	}
	if over {
		return errExceedsFirstInstallment()
	}
	if _, err := tx.ExecContext(ctx, cancelInstallmentsSQL, orderID, now); err != nil {
		return fmt.Errorf("cancel the order's installments: %w", err)
	}
	return nil
}
