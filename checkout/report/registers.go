package report

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Register is one client's register with its resend statistics: how many batches it sent
// (distinct batch keys) and how often (arrivals: a resend is another arrival of a batch),
// the sales created and the duplicates absorbed (sales answered from an earlier arrival),
// the sales refused (conflict, invalid, expired, declined or to retry) and the sales that
// sold beyond the stock tekrar knew of.
type Register struct {
	ID         int64      `db:"id"`
	ClientID   int64      `db:"client_id"`
	ClientName string     `db:"client_name"`
	PublicID   string     `db:"public_id"`
	Name       string     `db:"name"`
	Batches    int64      `db:"batches"`
	Arrivals   int64      `db:"arrivals"`
	Created    int64      `db:"created"`
	Duplicates int64      `db:"duplicates"`
	Refused    int64      `db:"refused"`
	Sales      int64      `db:"sales"`
	Oversold   int64      `db:"oversold"`
	LastBatch  *time.Time `db:"last_batch"`
}

// registersLimit bounds the registers page.
const registersLimit = 500

// Registers lists the registers of every client, or of one (clientID > 0), by client and
// register id, with their statistics.
func Registers(ctx context.Context, db sqlx.QueryerContext, clientID int64) ([]Register, error) {
	var rows []Register
	err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT r.id, r.client_id, c.name AS client_name, r.public_id, r.name,
		       coalesce(a.batches, 0) AS batches, coalesce(a.arrivals, 0) AS arrivals,
		       coalesce(a.created, 0) AS created, coalesce(a.duplicates, 0) AS duplicates,
		       coalesce(a.refused, 0) AS refused, a.last_batch,
		       (SELECT count(*) FROM pos_sales s WHERE s.register_id = r.id) AS sales,
		       (SELECT count(*) FROM pos_sales s WHERE s.register_id = r.id AND s.oversold_units > 0) AS oversold
		  FROM registers r JOIN clients c ON c.id = r.client_id
		  LEFT JOIN LATERAL (
		      SELECT count(DISTINCT batch_key) AS batches, count(*) AS arrivals, sum(created) AS created,
		             sum(replayed) AS duplicates, sum(refused) AS refused, max(received_at) AS last_batch
		        FROM pos_batch_arrivals WHERE register_id = r.id) a ON true
		 WHERE $1 = 0 OR r.client_id = $1
		 ORDER BY r.client_id, r.public_id LIMIT $2`, clientID, registersLimit)
	if err != nil {
		return nil, fmt.Errorf("registers: %w", err)
	}
	for i := range rows {
		if t := rows[i].LastBatch; t != nil {
			u := t.UTC()
			rows[i].LastBatch = &u
		}
	}
	return rows, nil
}

// OrderRegister is the register that sold an order, and when the sale happened there.
type OrderRegister struct {
	RegisterID    int64     `db:"register_id"`
	ClientID      int64     `db:"client_id"`
	PublicID      string    `db:"public_id"`
	Name          string    `db:"name"`
	SoldAt        time.Time `db:"sold_at"`
	ReceivedAt    time.Time `db:"received_at"`
	OversoldUnits int64     `db:"oversold_units"`
}

// GetOrderRegister returns the register of an order, or nil when no register sold it.
func GetOrderRegister(ctx context.Context, db sqlx.QueryerContext, orderID int64) (*OrderRegister, error) {
	var r OrderRegister
	err := sqlx.GetContext(ctx, db, &r, `
		SELECT s.register_id, r.client_id, r.public_id, r.name, s.sold_at, s.received_at, s.oversold_units
		  FROM pos_sales s JOIN registers r ON r.id = s.register_id WHERE s.order_id = $1`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("order register: %w", err)
	}
	r.SoldAt, r.ReceivedAt = r.SoldAt.UTC(), r.ReceivedAt.UTC()
	return &r, nil
}

// RegisterSale is a sale of a register: its order, when it happened at the till and when
// tekrar received it, and how many units it sold beyond the stock tekrar knew of.
type RegisterSale struct {
	RegisterID    int64     `db:"register_id"`
	Register      string    `db:"register"` // the register's public id, the client's own
	ClientID      int64     `db:"client_id"`
	ClientName    string    `db:"client_name"`
	OrderPublicID string    `db:"order_public_id"`
	Key           string    `db:"key"` // the sale's idempotency key, its identity at the till
	Status        string    `db:"status"`
	Amount        int64     `db:"amount"`
	Currency      string    `db:"currency"`
	SoldAt        time.Time `db:"sold_at"`
	ReceivedAt    time.Time `db:"received_at"`
	OversoldUnits int64     `db:"oversold_units"`
}

// oversoldLimit bounds the oversold sales page.
const oversoldLimit = 200

// OversoldSales returns the sales that sold beyond the stock, of every register or of one
// (registerID > 0), newest first, at most 200. Both read the partial index of oversold
// sales (migration 00046), which holds only them.
func OversoldSales(ctx context.Context, db sqlx.QueryerContext, registerID int64) ([]RegisterSale, error) {
	var rows []RegisterSale
	if err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT s.register_id, r.public_id AS register, r.client_id, c.name AS client_name,
		       o.public_id::text AS order_public_id,
		       coalesce((SELECT k.key FROM idempotency_keys k WHERE k.order_id = o.id
		                 UNION ALL SELECT t.key FROM key_tombstones t WHERE t.order_id = o.id LIMIT 1), '') AS key,
		       o.status, o.amount, o.currency, s.sold_at, s.received_at, s.oversold_units
		  FROM pos_sales s
		  JOIN orders o ON o.id = s.order_id
		  JOIN registers r ON r.id = s.register_id
		  JOIN clients c ON c.id = r.client_id
		 WHERE s.oversold_units > 0 AND ($1 = 0 OR s.register_id = $1)
		 ORDER BY s.order_id DESC LIMIT $2`, registerID, oversoldLimit); err != nil {
		return nil, fmt.Errorf("oversold sales: %w", err)
	}
	for i := range rows {
		rows[i].SoldAt, rows[i].ReceivedAt = rows[i].SoldAt.UTC(), rows[i].ReceivedAt.UTC()
	}
	return rows, nil
}
