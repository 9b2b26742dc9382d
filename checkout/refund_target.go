package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// RefundTarget is an order as an operator about to refund it needs to see it: what was
// captured, what is refunded or being refunded, and so what is left. A view of the order.
type RefundTarget struct {
	OrderID    int64
	PublicID   string // what the operator sees and the console's URLs name
	ClientID   int64
	ClientName string
	Status     string
	Amount     int64
	Currency   string
	Captured   int64
	// Refunded counts the refunds in progress too: their amounts are reserved on the order
	// when they are claimed.
	Refunded      int64
	CustomerID    string
	CustomerEmail string
}

// Refundable is what may still be refunded: only the capture of a paid (or partially
// refunded) order can be, and not while a dispute of it is open.
func (t RefundTarget) Refundable() int64 {
	if !RefundableStatuses.Has(t.Status) {
		return 0
	}
	return t.Captured - t.Refunded
}

// GetRefundTarget returns the order an operator means to refund, by its public id;
// ErrOrderNotFound if there is none.
func GetRefundTarget(ctx context.Context, db sqlx.QueryerContext, publicID string) (RefundTarget, error) {
	if !ValidOrderID(publicID) {
		return RefundTarget{}, ErrOrderNotFound
	}
	o, err := getOrder(ctx, db, `o.public_id = $1`, publicID)
	if errors.Is(err, sql.ErrNoRows) {
		return RefundTarget{}, ErrOrderNotFound
	}
	if err != nil {
		return RefundTarget{}, fmt.Errorf("get refund target: %w", err)
	}
	t := RefundTarget{OrderID: o.ID, PublicID: o.PublicID, ClientID: o.ClientID, Status: o.Status,
		Amount: o.Amount, Currency: o.Currency, Captured: o.CapturedAmount, Refunded: o.RefundedAmount,
		CustomerID: o.CustomerID.String, CustomerEmail: o.CustomerEmail.String}
	if err := sqlx.GetContext(ctx, db, &t.ClientName, `SELECT name FROM clients WHERE id = $1`, o.ClientID); err != nil {
		return RefundTarget{}, fmt.Errorf("get refund target: client: %w", err)
	}
	return t, nil
}
