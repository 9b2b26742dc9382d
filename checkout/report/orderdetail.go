package report

// The console's reads of one order ("was this customer charged twice, and by what?") and
// the batch reads that complete a page of orders: their refunds and the first request of
// each. See report.go for the conventions (parameters only, index-backed, no whole scans).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
)

// OrderDetail is one order and everything that touched it.
type OrderDetail struct {
	OrderRow
	Metadata json.RawMessage // the client's metadata object; nil when none
	Refunds  []RefundRow
	// Keys are every idempotency key that touched the order, oldest first: the key that
	// created it and the keys of its refunds, live or swept (only a tombstone left).
	Keys []OrderKey
	// Compensation is the refund tekrar owed when it gave up on the order's charge at a
	// provider that could not cancel it; nil when it owed none.
	Compensation *Compensation
	// Disputes are the cardholder's disputes of the order's charge, oldest first.
	Disputes []Dispute
	// Register is the register that sold the order; nil for an order that is no sale of one.
	Register *OrderRegister
}

// Dispute is a row of order_disputes: a cardholder's dispute, as the provider reported it.
type Dispute struct {
	DisputeID string     `db:"dispute_id"`
	Amount    int64      `db:"amount"`
	Reason    string     `db:"reason"`
	Status    string     `db:"status"` // open, won or lost
	OpenedAt  time.Time  `db:"opened_at"`
	ClosedAt  *time.Time `db:"closed_at"`
}

const orderDisputesSQL = `
	SELECT dispute_id, amount, reason, status, opened_at, closed_at
	  FROM order_disputes WHERE order_id = $1 ORDER BY opened_at, id`

// Compensation is a row of compensations (see checkout/compensate.go).
type Compensation struct {
	ID         int64      `db:"id"`
	State      string     `db:"state"` // watching, refunded or no_charge
	Reason     string     `db:"reason"`
	ChargeID   *string    `db:"charge_id"`
	RefundID   *string    `db:"refund_id"`
	Amount     *int64     `db:"amount"`
	Attempts   int        `db:"attempts"`
	LastError  *string    `db:"last_error"`
	WatchUntil time.Time  `db:"watch_until"`
	CreatedAt  time.Time  `db:"created_at"`
	SettledAt  *time.Time `db:"settled_at"`
}

const orderCompensationSQL = `
	SELECT id, state, reason, charge_id, refund_id, amount, attempts, last_error, watch_until, created_at, settled_at
	  FROM compensations WHERE order_id = $1`

// OrderKey is an idempotency key of an order.
type OrderKey struct {
	ClientID int64  `db:"client_id"`
	Key      string `db:"key"`
	RefundID *int64 `db:"refund_id"` // nil: the key that created the order
	// RefundPublicID is the refund's public id, what the console shows; "" for the order's key.
	RefundPublicID string    `db:"refund_public_id"`
	State          string    `db:"state"`    // the live key's state, or KeyStateExpired: only its tombstone is left
	FirstAt        time.Time `db:"first_at"` // when the key first arrived
	// ForgetAt is set once the sweeper expired the key: a retry with it is refused until
	// then, after which the key is new again.
	ForgetAt *time.Time `db:"forget_at"`
}

// orderKeysSQL lists an order's keys ($1): live rows (with the tombstone of a row being
// swept) and tombstones whose row is gone. Both read through the order and refund indexes.
var orderKeysSQL = func() string {
	owner := sqlWhere(keyOwnerPreds("", "$1", ""))
	return `
	SELECT k.client_id, k.key, k.refund_id,
	       coalesce((SELECT r.public_id::text FROM refunds r WHERE r.id = k.refund_id), '') AS refund_public_id,
	       k.state, k.created_at AS first_at, t.forget_at
	  FROM idempotency_keys k
	  LEFT JOIN key_tombstones t ON t.key_id = k.id` + owner + `
	 UNION ALL
	SELECT k.client_id, k.key, k.refund_id,
	       coalesce((SELECT r.public_id::text FROM refunds r WHERE r.id = k.refund_id), ''),
	       '` + checkout.KeyStateExpired + `', k.first_seen, k.forget_at
	  FROM key_tombstones k` + owner + `
	   AND NOT EXISTS (SELECT 1 FROM idempotency_keys i WHERE i.id = k.key_id)
	 ORDER BY first_at, key`
}()

const orderMetadataSQL = `SELECT o.metadata::text FROM orders o WHERE o.id = $1`

// GetOrderDetail returns one order with its payment, metadata, refunds and keys.
// ErrOrderNotFound: there is no such order.
func GetOrderDetail(ctx context.Context, db sqlx.QueryerContext, id int64) (OrderDetail, error) {
	orders, err := loadOrderRows(ctx, db, []int64{id})
	if err != nil {
		return OrderDetail{}, err
	}
	if len(orders) == 0 {
		return OrderDetail{}, checkout.ErrOrderNotFound
	}
	d := OrderDetail{OrderRow: orders[0]}
	var meta sql.NullString
	if err := sqlx.GetContext(ctx, db, &meta, orderMetadataSQL, id); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return OrderDetail{}, fmt.Errorf("order metadata: %w", err)
	}
	if meta.Valid {
		d.Metadata = json.RawMessage(meta.String)
	}
	refunds, err := OrderRefunds(ctx, db, []int64{id})
	if err != nil {
		return OrderDetail{}, err
	}
	d.Refunds = refunds[id]
	if err := sqlx.SelectContext(ctx, db, &d.Keys, orderKeysSQL, id); err != nil {
		return OrderDetail{}, fmt.Errorf("order keys: %w", err)
	}
	if d.Disputes, d.Compensation, err = OrderCases(ctx, db, id); err != nil {
		return OrderDetail{}, err
	}
	if d.Register, err = GetOrderRegister(ctx, db, id); err != nil {
		return OrderDetail{}, err
	}
	for i := range d.Keys {
		d.Keys[i].FirstAt = d.Keys[i].FirstAt.UTC()
		if t := d.Keys[i].ForgetAt; t != nil {
			u := t.UTC()
			d.Keys[i].ForgetAt = &u
		}
	}
	return d, nil
}

// OrderCases returns what the provider reported against an order's charge: its disputes,
// oldest first, and the compensation tekrar owed for it (nil when none).
func OrderCases(ctx context.Context, db sqlx.QueryerContext, orderID int64) ([]Dispute, *Compensation, error) {
	var disputes []Dispute
	if err := sqlx.SelectContext(ctx, db, &disputes, orderDisputesSQL, orderID); err != nil {
		return nil, nil, fmt.Errorf("order disputes: %w", err)
	}
	var comp Compensation
	switch err := sqlx.GetContext(ctx, db, &comp, orderCompensationSQL, orderID); {
	case errors.Is(err, sql.ErrNoRows):
		return disputes, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("order compensation: %w", err)
	}
	return disputes, &comp, nil
}

const ordersRefundsSQL = `
	SELECT r.id, r.public_id, r.order_id, r.amount, r.currency, r.status, coalesce(r.reason, '') AS reason,
	       coalesce(r.provider_refund_id, '') AS provider_refund_id, r.created_at, r.updated_at,
	       coalesce((SELECT k.key FROM idempotency_keys k WHERE k.refund_id = r.id),
	                (SELECT t.key FROM key_tombstones t WHERE t.refund_id = r.id LIMIT 1), '') AS key
	  FROM refunds r
	 WHERE r.order_id = ANY ($1::bigint[])
	 ORDER BY r.order_id, r.id`

// OrderRefunds returns the refunds of the given orders (a page of a search), oldest first,
// by order id; an order without refunds is absent.
func OrderRefunds(ctx context.Context, db sqlx.QueryerContext, orderIDs []int64) (map[int64][]RefundRow, error) {
	var rows []RefundRow
	if err := sqlx.SelectContext(ctx, db, &rows, ordersRefundsSQL, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("order refunds: %w", err)
	}
	out := make(map[int64][]RefundRow)
	for _, r := range rows {
		r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
		out[r.OrderID] = append(out[r.OrderID], r)
	}
	return out, nil
}

// arrivalSlack is how long before an order's created_at its key's created event may be
// stamped: the two are read from the clock moments apart, in either order.
const arrivalSlack = time.Minute

// orderArrivalsSQL reads, for each (order, key), the key's first created event from the
// order's creation on: a probe of key_events_key_idx (client_id, key, at) in index order.
// Starting at the order's time skips the events of an earlier use of the same key string.
const orderArrivalsSQL = `
	SELECT e.*, o.order_id
	  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS o (order_id, client_id, key, created_us)
	 CROSS JOIN LATERAL (
	       SELECT ` + eventColumns + `
	         FROM key_events e
	        WHERE e.client_id = o.client_id AND e.key = o.key AND e.kind = 'created'
	          AND e.at >= timestamptz 'epoch' + (o.created_us - $5::bigint) * interval '1 microsecond'
	        ORDER BY e.at, e.id
	        LIMIT 1) e
	 ORDER BY e.at, e.id`

// OrderArrivals returns the request that created each order, by order id: the created
// event of its key, with the device (user agent) and address it came from. An order whose
// event is not (or no longer) recorded is absent.
func OrderArrivals(ctx context.Context, db sqlx.QueryerContext, orders []OrderRow) (map[int64]HistoryRow, error) {
	var ids, clients []int64
	var keys []string
	var ats []int64 // microseconds since the epoch
	for _, o := range orders {
		for _, k := range o.Keys {
			ids, clients, keys, ats = append(ids, o.ID), append(clients, o.ClientID), append(keys, k), append(ats, o.CreatedAt.UnixMicro())
		}
	}
	out := make(map[int64]HistoryRow)
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := selectHistory(ctx, db, orderArrivalsSQL, []any{pq.Array(ids), pq.Array(clients), pq.Array(keys),
		pq.Array(ats), arrivalSlack.Microseconds()})
	if err != nil {
		return nil, fmt.Errorf("order arrivals: %w", err)
	}
	for _, r := range rows {
		if r.OrderID == nil {
			continue
		}
		if _, seen := out[*r.OrderID]; !seen { // rows are oldest first: keep the first arrival
			out[*r.OrderID] = r
		}
	}
	return out, nil
}
