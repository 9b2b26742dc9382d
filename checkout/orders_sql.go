package checkout

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// providerKey derives the key tekrar sends the provider for one step of a key row. It is
// stable for the row (a resumed request sends the same one, so the provider charges once)
// and never reveals the client's raw key. created_at is part of it so that a key row id
// reused after a database restore cannot collide with an old charge.
func providerKey(step string, k *Key) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s\x00%d", step, k.ID, k.ClientID, k.Key, k.CreatedAt.UnixMicro())
	return "tekrar_" + step[:2] + "_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// claimOrder inserts the key row and its pending order in one statement, so the two commit
// together or not at all. ON CONFLICT DO NOTHING on (client_id, key) decides which of many
// concurrent first arrivals wins; the losers get errNoKey and look the key up again. A key
// with a live tombstone (swept, still in its grace period) is not claimed: the tombstone
// comes back instead, as a Key with Tombstone set.
//
// The order's public id (what the client sees) is the default of orders.public_id, random,
// made by this statement and returned with the key.
//
// The order id comes from the identity sequence of orders.id, named as Postgres names it
// (orders_id_seq): a constant name is resolved once per prepared statement, where
// pg_get_serial_sequence looked it up in the catalogue at every claim.
//
// It runs after a look-up found no key. Folding the look-up into this statement would save
// the first arrival a round trip but make every replay an INSERT statement, which opens and
// locks both tables and all their indexes: measured, replays then ran at half the rate.
//
// The fingerprint is cast to bytea because its column is a domain (sha256_digest): without
// binary parameters, lib/pq sends a []byte as raw text to any parameter not typed bytea.
func claimOrder(ctx context.Context, db sqlx.QueryerContext, k *Key, amount int64, currency string,
	items []byte, customerID, customerEmail *string, metadata []byte) (_ *Key, claimed bool, _ error) {
	var row Key
	err := sqlx.GetContext(ctx, db, &row, `
		WITH t AS (`+tombstoneAsKey+`
		), k AS (
		    INSERT INTO idempotency_keys
		           (client_id, key, fingerprint, method, path, state, recovery_point,
		            lease_expires_at, order_id, created_at, expires_at)
		    SELECT $1, $2, $4::bytea, $5, $6, 'in_progress', 'order_created',
		           $7, nextval('orders_id_seq'), $3, $8
		     WHERE NOT EXISTS (SELECT 1 FROM t)
		    ON CONFLICT (client_id, key) DO NOTHING
		    RETURNING `+keyColumns+`
		), o AS (
		    INSERT INTO orders (id, client_id, status, amount, currency, items, customer_id,
		                        customer_email, metadata, created_at, updated_at)
		    SELECT k.order_id, $1, 'pending', $9, $10, $11, $12, $13, $14, $3, $3 FROM k
		    RETURNING public_id
		)
		SELECT k.*, o.public_id::text AS order_public_id, '' AS refund_public_id FROM k, o
		UNION ALL SELECT * FROM t`,
		k.ClientID, k.Key, k.CreatedAt, k.Fingerprint, k.Method, k.Path,
		k.LeaseExpiresAt, k.ExpiresAt,
		amount, currency, string(items), customerID, customerEmail, nullJSON(metadata))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, errNoKey
	}
	if err != nil {
		return nil, false, fmt.Errorf("claim key and create order: %w", err)
	}
	return &row, !row.Tombstone, nil
}

// completeOrder records the charge, settles the order and stores the response, all fenced
// by the lease token: if the key was taken over meanwhile, nothing is written.
func completeOrder(ctx context.Context, db sqlx.QueryerContext, k *Key, resp Response, now time.Time,
	status string, captured int64, ch psp.Charge, pk string) error {
	headers, err := jsonHeaders(resp)
	if err != nil {
		return err
	}
	var n int
	err = sqlx.GetContext(ctx, db, &n, `
		WITH k AS (`+completeKeySQL+`
		), o AS (
		    UPDATE orders SET status = $7, captured_amount = $8, updated_at = $6
		     WHERE id = (SELECT order_id FROM k)
		), p AS (
		    INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency,
		                          status, decline_code, card_brand, card_last4, created_at)
		    SELECT k.order_id, $9, $10, $11, $12, $13, $14, $15, $16, $6 FROM k
		)
		SELECT count(*) FROM k`,
		k.ID, k.LeaseToken, resp.Status, string(headers), resp.Body, now,
		status, captured,
		ch.ID, pk, ch.Amount, ch.Currency, ch.Status, nullable(ch.DeclineCode), nullable(ch.CardBrand), nullable(ch.CardLast4))
	if err != nil {
		return fmt.Errorf("complete order: %w", err)
	}
	if n == 0 {
		return errFenced
	}
	return nil
}

func jsonHeaders(r Response) ([]byte, error) {
	b, err := json.Marshal(r.Header)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return b, nil
}

// nullJSON passes a JSON document as text: with binary parameters on, []byte would be sent
// as binary jsonb, which has a version byte that plain JSON lacks.
func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// orderIDSyntax is the shape of an order's public id: "ord_" and 32 lower-case hex digits,
// as the domain order_public_id (migrations/00013_public_ids.sql) says.
var orderIDSyntax = regexp.MustCompile(`^ord_[0-9a-f]{32}$`)

// ValidOrderID reports whether s has the shape of an order's public id, so that a path
// holding anything else (an internal integer id among them) is answered 404 without a query.
func ValidOrderID(s string) bool { return orderIDSyntax.MatchString(s) }

func nullTime(t time.Time) sql.NullTime { return sql.NullTime{Time: t, Valid: true} }

// orderRow is an order joined with its payment.
type orderRow struct {
	ID             int64          `db:"id"`
	PublicID       string         `db:"public_id"`
	Status         string         `db:"status"`
	Amount         int64          `db:"amount"`
	Currency       string         `db:"currency"`
	Items          []byte         `db:"items"`
	CustomerID     sql.NullString `db:"customer_id"`
	CustomerEmail  sql.NullString `db:"customer_email"`
	Metadata       []byte         `db:"metadata"`
	RefundedAmount int64          `db:"refunded_amount"`
	CreatedAt      time.Time      `db:"created_at"`
	ChargeID       sql.NullString `db:"provider_charge_id"`
	PayStatus      sql.NullString `db:"pay_status"`
	DeclineCode    sql.NullString `db:"decline_code"`
	CardBrand      sql.NullString `db:"card_brand"`
	CardLast4      sql.NullString `db:"card_last4"`
}

const orderSelect = `
	SELECT o.id, o.public_id, o.status, o.amount, o.currency, o.items, o.customer_id, o.customer_email,
	       o.metadata, o.refunded_amount, o.created_at,
	       p.provider_charge_id, p.status AS pay_status, p.decline_code, p.card_brand, p.card_last4
	  FROM orders o LEFT JOIN payments p ON p.order_id = o.id`

func (r *orderRow) view() (OrderView, error) {
	v := OrderView{ID: r.PublicID, Status: r.Status, Amount: r.Amount, Currency: r.Currency,
		RefundedAmount: r.RefundedAmount, CreatedAt: r.CreatedAt.UTC()}
	if err := json.Unmarshal(r.Items, &v.Items); err != nil {
		return OrderView{}, fmt.Errorf("order %d items: %w", r.ID, err)
	}
	if len(r.Metadata) > 0 {
		if err := json.Unmarshal(r.Metadata, &v.Metadata); err != nil {
			return OrderView{}, fmt.Errorf("order %d metadata: %w", r.ID, err)
		}
	}
	if r.CustomerID.Valid || r.CustomerEmail.Valid {
		v.Customer = &Customer{ID: r.CustomerID.String, Email: r.CustomerEmail.String}
	}
	if r.ChargeID.Valid {
		v.Payment = &PaymentView{ID: r.ChargeID.String, Status: r.PayStatus.String, DeclineCode: r.DeclineCode.String,
			CardBrand: r.CardBrand.String, CardLast4: r.CardLast4.String}
	}
	return v, nil
}

// ErrOrderNotFound is an order that does not exist or belongs to another client: the two
// are indistinguishable to a client by design. Every order_not_found problem is it
// (errors.Is); a shared value, never modified (Advised copies).
var ErrOrderNotFound error = problem.Of(problem.CodeOrderNotFound)

// GetOrder returns one of the client's orders by its public id. Anything that is not an
// order id (an integer, another prefix) is not found, without a query.
func (s *Service) GetOrder(ctx context.Context, clientID int64, publicID string) (OrderView, error) {
	if !ValidOrderID(publicID) {
		return OrderView{}, ErrOrderNotFound
	}
	var r orderRow
	err := sqlx.GetContext(ctx, s.db, &r, orderSelect+` WHERE o.public_id = $1 AND o.client_id = $2`, publicID, clientID)
	if errors.Is(err, sql.ErrNoRows) {
		return OrderView{}, ErrOrderNotFound
	}
	if err != nil {
		return OrderView{}, fmt.Errorf("get order: %w", err)
	}
	return r.view()
}

// ErrBadCursor is an `after` that is not an order of the listed customer of the client.
var ErrBadCursor = errors.New("after is not an order of this list")

// ListOrders returns a page of the client's orders for one customer, newest first, starting
// after the order whose public id is `after` ("": from the newest). Keyset pagination on
// the internal id, which the cursor order is looked up for: the cost of a page does not
// grow with how deep it is.
func (s *Service) ListOrders(ctx context.Context, clientID int64, customerID string, afterID string, limit int) ([]OrderView, bool, error) {
	after := int64(1<<63 - 1)
	if afterID != "" {
		if !ValidOrderID(afterID) {
			return nil, false, ErrBadCursor
		}
		err := sqlx.GetContext(ctx, s.db, &after, `
			SELECT id FROM orders WHERE public_id = $1 AND client_id = $2 AND customer_id = $3`,
			afterID, clientID, customerID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, ErrBadCursor
		}
		if err != nil {
			return nil, false, fmt.Errorf("list orders: cursor: %w", err)
		}
	}
	var rows []orderRow
	err := sqlx.SelectContext(ctx, s.db, &rows, orderSelect+`
		 WHERE o.client_id = $1 AND o.customer_id = $2 AND o.id < $3
		 ORDER BY o.id DESC
		 LIMIT $4`, clientID, customerID, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list orders: %w", err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]OrderView, 0, len(rows))
	for i := range rows {
		v, err := rows[i].view()
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	return out, more, nil
}
