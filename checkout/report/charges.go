package report

// What the provider charged for each of a few orders: the one charge of an order paid at
// once, or each paid installment of an order paid in installments. The console's advice
// ("charged once?", "how much is left to refund?") counts these charges and their amounts;
// an order's amount is its price, not what was charged for it, and an order's payment row
// is only the first installment of a plan.

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Charge is one succeeded charge of an order at the provider.
type Charge struct {
	OrderID  int64     `db:"order_id"`
	N        int       `db:"n"` // the installment it paid; 0 for an order paid at once
	ChargeID string    `db:"charge_id"`
	Amount   int64     `db:"amount"`
	At       time.Time `db:"at"`
}

// OrderCharges is what an order was charged: its succeeded charges, oldest first, and the
// number of installments of its plan (1: paid at once).
type OrderCharges struct {
	Installments int
	Charges      []Charge
}

// Total is the sum of the charges: the order's captured amount.
func (c OrderCharges) Total() int64 {
	var n int64
	for _, ch := range c.Charges {
		n += ch.Amount
	}
	return n
}

// orderChargesSQL reads the charges of the orders $1: the paid installments of an order with
// a plan (the first is the order's payment, under the order's provider key), else the
// order's one succeeded payment. Read by the orders' primary key, payments' order_id and
// installments' (order_id, n).
const orderChargesSQL = `
	SELECT i.order_id, i.n, i.provider_charge_id AS charge_id, i.amount, i.paid_at AS at
	  FROM orders o JOIN installments i ON i.order_id = o.id
	 WHERE o.id = ANY ($1::bigint[]) AND o.installments > 1 AND i.status = 'paid'
	 UNION ALL
	SELECT p.order_id, 0, p.provider_charge_id, p.amount, p.created_at
	  FROM orders o JOIN payments p ON p.order_id = o.id
	 WHERE o.id = ANY ($1::bigint[]) AND o.installments = 1 AND p.status = 'succeeded'
	 ORDER BY order_id, at, n`

const orderPlansSQL = `SELECT id, installments FROM orders WHERE id = ANY ($1::bigint[])`

// ChargesOf returns what each of the orders ids (internal ids) was charged, by order id;
// an order that was never charged has no charges.
func ChargesOf(ctx context.Context, db sqlx.QueryerContext, ids []int64) (map[int64]OrderCharges, error) {
	var plans []struct {
		ID           int64 `db:"id"`
		Installments int   `db:"installments"`
	}
	if err := sqlx.SelectContext(ctx, db, &plans, orderPlansSQL, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("order plans: %w", err)
	}
	out := make(map[int64]OrderCharges, len(plans))
	for _, p := range plans {
		out[p.ID] = OrderCharges{Installments: p.Installments}
	}
	var charges []Charge
	if err := sqlx.SelectContext(ctx, db, &charges, orderChargesSQL, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("order charges: %w", err)
	}
	for _, ch := range charges {
		ch.At = ch.At.UTC()
		c := out[ch.OrderID]
		c.Charges = append(c.Charges, ch)
		out[ch.OrderID] = c
	}
	return out, nil
}
