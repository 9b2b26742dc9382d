package checkout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/internal/problem"
)

// An order line refers to a product by its sku when it is marked from_stock: the claim
// takes its quantity from the product's level, and refuses the order when the level is
// short or the line's unit_amount (or the order's currency) is not the product's price.
// The client states the price it showed; tekrar checks it and never fills it in, so the
// amount charged is always the one in the request, and a price changed since the client
// read it is a clear 409, not a silent surprise. Lines without from_stock are free-form,
// as they always were, and touch no product.

// stockLine is what an order takes from one product: the sum of its from_stock lines of
// one sku (Validate has made sure they agree on the price).
type stockLine struct {
	SKU        string
	Quantity   int64
	UnitAmount int64
}

// stockLines sums the from_stock lines per sku, in the order the skus first appear.
func stockLines(items []Item) []stockLine {
	var out []stockLine
	at := map[string]int{}
	for _, it := range items {
		if !it.FromStock {
			continue
		}
		if i, ok := at[it.SKU]; ok {
			out[i].Quantity += it.Quantity
			continue
		}
		at[it.SKU] = len(out)
		out = append(out, stockLine{SKU: it.SKU, Quantity: it.Quantity, UnitAmount: it.UnitAmount})
	}
	return out
}

// stockParams puts the lines into the claim's parameters, one array per column; all nil
// (NULL) when the order takes nothing from stock, and the claim then touches no product.
func stockParams(p *orderClaim, lines []stockLine) {
	for _, l := range lines {
		p.StockSKUs = append(p.StockSKUs, l.SKU)
		p.StockQuantities = append(p.StockQuantities, l.Quantity)
		p.StockPrices = append(p.StockPrices, l.UnitAmount)
	}
}

// sqlStateShortStock is what refuse_short_stock raises (migrations/00024_products_stock_carts.sql).
const sqlStateShortStock = pqerror.Code("TK001")

// errShortStock is a claim that failed, as a whole, because a line could not be taken from
// stock: nothing was written, the key included.
var errShortStock = errors.New("a line could not be taken from stock")

// isShortStock reports whether a statement was refused by refuse_short_stock, or by the
// CHECK that keeps every level at or above zero.
func isShortStock(err error) bool {
	if pq.As(err, sqlStateShortStock) != nil {
		return true
	}
	e := pq.As(err, pqerror.CheckViolation)
	return e != nil && e.Constraint == "products_stock_not_negative"
}

// isDeadlock reports a statement Postgres aborted to break a deadlock: two orders locking
// the same products in another order. The statement was rolled back whole; running it
// again is safe.
func isDeadlock(err error) bool { return pq.As(err, pqerror.TRDeadlockDetected) != nil }

// shortStockProblem says why a claim could not take its lines from stock, read after the
// claim was refused: the first line whose product is missing, priced otherwise or short.
// The levels may have changed since the claim; if every line would now pass, the answer is
// still out_of_stock (it was, at the claim), and the client may retry.
func shortStockProblem(ctx context.Context, db sqlx.QueryerContext, clientID int64, currency string, lines []stockLine) error {
	skus := make([]string, len(lines))
	for i, l := range lines {
		skus[i] = l.SKU
	}
	rows, err := catalog.ReadProducts(ctx, db, clientID, skus)
	if err != nil {
		return fmt.Errorf("read products of a refused order: %w", err)
	}
	bySKU := make(map[string]catalog.ProductView, len(rows))
	for _, r := range rows {
		bySKU[r.SKU] = r
	}
	for _, l := range lines {
		p, ok := bySKU[l.SKU]
		switch {
		case !ok:
			return problem.Of(problem.CodeProductNotFound).
				WithDetail("a from_stock line names a sku this client has no product for; nothing was stored").
				With("sku", l.SKU).Advised()
		case p.Price != l.UnitAmount || p.Currency != currency:
			return problem.Of(problem.CodePriceMismatch).
				WithDetail("a from_stock line's unit_amount or the order's currency is not the product's price; nothing was stored").
				With("sku", l.SKU).With("price", p.Price).With("currency", p.Currency).Advised()
		case p.Stock < l.Quantity:
			return outOfStock(l.SKU, p.Stock)
		}
	}
	return outOfStock(lines[0].SKU, -1)
}

func outOfStock(sku string, available int64) *problem.Problem {
	p := problem.Of(problem.CodeOutOfStock).
		WithDetail("the order asks for more than is in stock; nothing was stored or charged").With("sku", sku)
	if available >= 0 {
		p.With("available", available)
	}
	return p.Advised()
}

// retryDeadlock runs a statement that ends an order (run) again when Postgres broke a
// deadlock by failing it: its release of stock locks products, which an order's claim
// locks in the order of its lines. The statement rolled back whole, and is fenced by the
// key's lease token, so running it again is safe; not inside a transaction (db a *sqlx.Tx:
// an operator's release, a provider event), which the failure aborted, and whose caller
// sees the error.
func retryDeadlock(db sqlx.QueryerContext, run func() error) error {
	err := run()
	if _, inTx := db.(*sqlx.Tx); inTx {
		return err
	}
	for try := 1; isDeadlock(err) && try < 3; try++ {
		err = run()
	}
	return err
}

// releaseStockSQL gives back what an order took from stock when the statement that ends
// it ends it unsold: stock is held only by sales that end sold. It is a part of a WITH
// list, for the statements that settle an order (completeOrderSQL: declined;
// cancelOrderSQL: canceled), which return the order they ended as o (id, status) and name
// the time :now; o is empty when their fence matched nothing, and so is the release. What
// the order holds is the negated sum of its movements (its sale takes, less anything given
// back before), so a release gives back only what is still held, once, and nothing for an
// order that took nothing (an oversold register sale takes only what the level had). The
// products are locked in id order (rl), as a register's chunk locks them, so a release
// and a chunk wait for each other rather than deadlock. Each product given back is a
// 'release' movement naming the order: the movements still add up to the level. A
// register's sale ended unsold oversold nothing either (rp): its units are the next sale's,
// which the till makes with a new key.
var releaseStockSQL = `
	rh AS (
	    SELECT m.product_id, -sum(m.delta) AS quantity
	      FROM stock_movements m JOIN o ON o.id = m.order_id
	     WHERE o.status IN ` + UnchargedStatuses.SQL() + `
	     GROUP BY m.product_id
	    HAVING sum(m.delta) < 0
	), rl AS (
	    SELECT pr.id FROM products pr WHERE pr.id IN (SELECT product_id FROM rh) ORDER BY pr.id FOR UPDATE
	), ru AS (
	    UPDATE products pr SET stock = pr.stock + rh.quantity, version = pr.version + 1, updated_at = :now
	      FROM rl JOIN rh ON rh.product_id = rl.id
	     WHERE pr.id = rl.id
	), rm AS (
	    INSERT INTO stock_movements (product_id, delta, reason, order_id, created_at)
	    SELECT rh.product_id, rh.quantity, 'release', o.id, :now FROM rh, o
	), rp AS (
	    UPDATE pos_sales SET oversold_units = 0
	     WHERE order_id IN (SELECT o.id FROM o WHERE o.status IN ` + UnchargedStatuses.SQL() + `) AND oversold_units > 0
	)`

// restockable is what a refund may still put back of one product an order sold: what the
// order took, less what its earlier refunds put back (the negated sum of its movements).
type restockable struct {
	ProductID int64  `db:"product_id"`
	SKU       string `db:"sku"`
	Quantity  int64  `db:"quantity"`
}

// restock puts back into stock, for a refund being claimed in tx, what the order took
// (items nil: all of it not put back yet; else the items listed), one movement per
// product. It runs in the refund's claim transaction, after the order's row was locked by
// the reservation of the refund's amount: refunds of one order restock one after the
// other, each reading the movements of the ones before, and a replay of the refund, which
// claims nothing, restocks nothing. Asking for more than is left is refused
// (restock_exceeds_sold), and the whole claim with it.
func restock(ctx context.Context, tx *sqlx.Tx, orderID, refundID int64, items []RestockItem, now time.Time) error {
	var left []restockable
	err := tx.SelectContext(ctx, &left, `
		SELECT m.product_id, p.sku, -sum(m.delta) AS quantity
		  FROM stock_movements m JOIN products p ON p.id = m.product_id
		 WHERE m.order_id = $1 AND m.reason IN ('sale', 'refund')
		 GROUP BY m.product_id, p.sku
		 ORDER BY m.product_id`, orderID)
	if err != nil {
		return fmt.Errorf("restock: read the order's movements: %w", err)
	}
	put := map[int64]int64{} // product id → quantity
	if items == nil {
		for _, l := range left {
			if l.Quantity > 0 {
				put[l.ProductID] = l.Quantity
			}
		}
	}
	for _, it := range items {
		i := slices.IndexFunc(left, func(l restockable) bool { return l.SKU == it.SKU })
		if i < 0 || left[i].Quantity < it.Quantity {
			n := int64(0)
			if i >= 0 {
				n = left[i].Quantity
			}
			return problem.Of(problem.CodeRestockExceedsSold).
				WithDetail("the refund asks to restock more than the order took from stock, less what its refunds put back; nothing was stored").
				With("sku", it.SKU).With("restockable", n).Advised()
		}
		put[left[i].ProductID] = it.Quantity
	}
	for _, l := range left { // in product id order: concurrent restocks lock alike
		q, ok := put[l.ProductID]
		if !ok {
			continue
		}
		_, err := tx.ExecContext(ctx, `
			WITH p AS (
			    UPDATE products SET stock = stock + $2, version = version + 1, updated_at = $5 WHERE id = $1
			    RETURNING id
			)
			INSERT INTO stock_movements (product_id, delta, reason, order_id, refund_id, created_at)
			SELECT p.id, $2, 'refund', $3, $4, $5 FROM p`, l.ProductID, q, orderID, refundID, now)
		if err != nil {
			return fmt.Errorf("restock product %d: %w", l.ProductID, err)
		}
	}
	return nil
}
