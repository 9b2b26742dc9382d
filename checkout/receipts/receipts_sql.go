package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// The SQL of the receipts table, and the reads of orders, payments and refunds a receipt
// needs: this package does not import checkout, which owns those tables' writes.

// orderFacts is what a receipt says about its order.
type orderFacts struct {
	ID         int64
	PublicID   string
	ClientID   int64
	ClientName string
	Amount     int64
	Currency   string
	Items      []byte // JSON: [{"sku","name","quantity","unit_amount"}]
	Email      string
	CardBrand  string
	CardLast4  string
	PaidAt     sql.NullTime
	TimeZone   string // the client's IANA zone: the receipt's times are written in it
}

// errUnusable: the event cannot have a receipt, now or on any retry (an order or refund
// that does not exist, data that cannot be read): a bug upstream, not a reason to retry
// the event's dispatch.
var errUnusable = errors.New("no receipt can be made")

func loadOrder(ctx context.Context, tx *sql.Tx, publicID string) (orderFacts, error) {
	var o orderFacts
	err := tx.QueryRowContext(ctx, `-- name: ReceiptOrder :one
		SELECT o.id, o.public_id, o.client_id, c.name, o.amount, o.currency, CAST(o.items AS text),
		       coalesce(o.customer_email, ''), coalesce(p.card_brand, ''), coalesce(p.card_last4, ''), p.created_at,
		       c.time_zone
		  FROM orders o
		  JOIN clients c ON c.id = o.client_id
		  LEFT JOIN payments p ON p.order_id = o.id AND p.status = 'succeeded'
		 WHERE o.public_id = $1`, publicID).Scan(&o.ID, &o.PublicID, &o.ClientID, &o.ClientName, &o.Amount,
		&o.Currency, &o.Items, &o.Email, &o.CardBrand, &o.CardLast4, &o.PaidAt, &o.TimeZone)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Errorf("order %q: no such order: %w", publicID, errUnusable)
	}
	if err != nil {
		return o, fmt.Errorf("load order %s: %w", publicID, err)
	}
	return o, nil
}

// refundFacts is what a refund receipt says about the refund.
type refundFacts struct {
	ID       int64
	PublicID string
	Amount   int64
	Reason   string
	At       time.Time
}

// loadRefund reads the succeeded refund publicID of the order, or, when the event names no
// refund, the order's latest succeeded refund.
func loadRefund(ctx context.Context, tx *sql.Tx, orderID int64, publicID string) (refundFacts, error) {
	var r refundFacts
	err := tx.QueryRowContext(ctx, `
		SELECT id, public_id, amount, coalesce(reason, ''), updated_at
		  FROM refunds
		 WHERE order_id = $1 AND status = 'succeeded' AND ($2 = '' OR public_id = $2)
		 ORDER BY id DESC
		 LIMIT 1`, orderID, publicID).Scan(&r.ID, &r.PublicID, &r.Amount, &r.Reason, &r.At)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("order %d has no succeeded refund %q: %w", orderID, publicID, errUnusable)
	}
	if err != nil {
		return r, fmt.Errorf("load refund: %w", err)
	}
	return r, nil
}

// installmentFacts is what an installment's receipt says about the installment.
type installmentFacts struct {
	N, Count int
	Amount   int64
	PaidAt   time.Time
}

// loadInstallment reads installment n of the order, paid.
func loadInstallment(ctx context.Context, tx *sql.Tx, orderID int64, n int) (installmentFacts, error) {
	f := installmentFacts{N: n}
	err := tx.QueryRowContext(ctx, `
		SELECT o.installments, i.amount, i.paid_at
		  FROM installments i JOIN orders o ON o.id = i.order_id
		 WHERE i.order_id = $1 AND i.n = $2 AND i.status = 'paid'`, orderID, n).Scan(&f.Count, &f.Amount, &f.PaidAt)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("order %d has no paid installment %d: %w", orderID, n, errUnusable)
	}
	if err != nil {
		return f, fmt.Errorf("load installment: %w", err)
	}
	return f, nil
}

// newReceipt is a rendered receipt to insert.
type newReceipt struct {
	EventID, Kind, Recipient, Subject, MessageID, Text, HTML, State string
	OrderID, ClientID                                               int64
	RefundID                                                        sql.NullInt64
	LastError                                                       sql.NullString
	CreatedAt                                                       time.Time
}

// insertReceipt stores r unless its event already has a receipt (a dispatch run again after
// a crash): then it returns 0.
func insertReceipt(ctx context.Context, tx *sql.Tx, r newReceipt) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `
		INSERT INTO receipts (event_id, order_id, client_id, refund_id, kind, recipient, subject, message_id,
		                      body_text, body_html, state, last_error, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (event_id) DO NOTHING
		RETURNING id`, r.EventID, r.OrderID, r.ClientID, r.RefundID, r.Kind, r.Recipient, r.Subject, r.MessageID,
		r.Text, r.HTML, r.State, r.LastError, r.CreatedAt).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("insert receipt: %w", err)
	}
	return id, nil
}

const receiptColumns = `r.id, r.event_id, o.public_id AS order_public_id, r.client_id, c.name AS client_name, r.kind,
	r.recipient, r.subject, r.message_id, r.body_text, r.body_html, r.state, r.attempts, r.last_error,
	r.refused_reason, r.created_at, r.sent_at, c.time_zone AS client_time_zone`

const receiptFrom = ` FROM receipts r JOIN orders o ON o.id = r.order_id JOIN clients c ON c.id = r.client_id `

// claimSend counts an attempt at sending a queued receipt before it is made, so that an
// attempt cut short by a crash is counted too, and returns the receipt; a receipt that is
// no longer queued (sent already, or failed) gives sql.ErrNoRows.
func claimSend(ctx context.Context, db *sql.DB, id int64) (Receipt, error) {
	var r Receipt
	err := sqlx.NewDb(db, "postgres").QueryRowxContext(ctx, `
		WITH r AS (
		    UPDATE receipts SET attempts = attempts + 1 WHERE id = $1 AND state = 'queued' RETURNING *
		)
		SELECT `+receiptColumns+` FROM r JOIN orders o ON o.id = r.order_id JOIN clients c ON c.id = r.client_id`, id).StructScan(&r)
	return r, err
}

// markSent records that the SMTP server accepted the receipt. It matches only a queued
// receipt, so sent_at is the time of the first acceptance recorded.
func markSent(ctx context.Context, db *sql.DB, id int64, now time.Time) error {
	if _, err := db.ExecContext(ctx, `
		UPDATE receipts SET state = 'sent', sent_at = $2, last_error = NULL
		 WHERE id = $1 AND state = 'queued'`, id, now); err != nil {
		return fmt.Errorf("mark receipt %d sent: %w", id, err)
	}
	return nil
}

// markAttemptFailed records why an attempt failed; final makes the receipt failed for good.
func markAttemptFailed(ctx context.Context, db *sql.DB, id int64, reason string, final bool) error {
	state := StateQueued
	if final {
		state = StateFailed
	}
	if _, err := db.ExecContext(ctx, `
		UPDATE receipts SET last_error = $2, state = $3 WHERE id = $1 AND state = 'queued'`, id, reason, state); err != nil {
		return fmt.Errorf("record failed attempt of receipt %d: %w", id, err)
	}
	return nil
}

// Filter narrows the console's list of receipts; zero values do not narrow.
type Filter struct {
	ClientID int64
	State    string
	Order    string // an order's public id
	Limit    int    // 0: 100
}

// Counts are the receipts per state, within the filter's client and order.
type Counts struct{ Kept, Queued, Sent, Failed, Refused int }

// List returns the receipts that match f, newest first, and the counts per state of the
// receipts of f's client and order (whatever the state asked for).
func List(ctx context.Context, db *sqlx.DB, f Filter) ([]Receipt, Counts, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var rows []Receipt
	where := ` WHERE ($1 = 0 OR r.client_id = $1) AND ($2 = '' OR o.public_id = $2) `
	if err := db.SelectContext(ctx, &rows, `SELECT `+receiptColumns+receiptFrom+where+
		` AND ($3 = '' OR r.state = $3) ORDER BY r.id DESC LIMIT $4`, f.ClientID, f.Order, f.State, f.Limit); err != nil {
		return nil, Counts{}, fmt.Errorf("list receipts: %w", err)
	}
	var c Counts
	if err := db.QueryRowxContext(ctx, `SELECT
		    count(*) FILTER (WHERE r.state = 'kept'), count(*) FILTER (WHERE r.state = 'queued'),
		    count(*) FILTER (WHERE r.state = 'sent'), count(*) FILTER (WHERE r.state = 'failed'),
		    count(*) FILTER (WHERE r.state = 'refused')`+
		receiptFrom+where, f.ClientID, f.Order).Scan(&c.Kept, &c.Queued, &c.Sent, &c.Failed, &c.Refused); err != nil {
		return nil, Counts{}, fmt.Errorf("count receipts: %w", err)
	}
	return rows, c, nil
}

// ErrNotFound: no receipt for that event.
var ErrNotFound = errors.New("no such receipt")

// Get returns the receipt made for an event. The console names a receipt by its event's
// public id: the integer id would show how many receipts all clients have.
func Get(ctx context.Context, db *sqlx.DB, eventID string) (Receipt, error) {
	var r Receipt
	err := db.GetContext(ctx, &r, `SELECT `+receiptColumns+receiptFrom+` WHERE r.event_id = $1`, eventID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("get receipt of %s: %w", eventID, err)
	}
	return r, nil
}
