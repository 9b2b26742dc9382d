package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
)

// claimRefund inserts the key row, reserves the amount on the order and creates the
// pending refund, in one transaction. The order is named by its public id (the path's);
// the refund's public id is the default of refunds.public_id, made by its INSERT. The reservation is an UPDATE of the order's
// refunded_amount, so concurrent refunds of one order queue on its row lock, and the
// CHECK orders_refund_within_capture refuses the one that would exceed the capture.
func claimRefund(ctx context.Context, d *sqlx.DB, k *Key, orderPublicID string, in RefundInput) (_ *Key, claimed bool, _ error) {
	if !ValidOrderID(orderPublicID) {
		return nil, false, ErrOrderNotFound
	}
	var out *Key
	err := inTx(ctx, d, "claim refund", func(tx *sqlx.Tx) error {
		var tomb Key
		err := sqlx.GetContext(ctx, tx, &tomb, tombstoneAsKey, k.ClientID, k.Key, k.CreatedAt)
		if err == nil {
			out = &tomb
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("claim refund: tombstone: %w", err)
		}
		var row Key
		err = sqlx.GetContext(ctx, tx, &row, `
			INSERT INTO idempotency_keys
			       (client_id, key, fingerprint, method, path, state, recovery_point,
			        lease_expires_at, refund_id, created_at, expires_at)
			VALUES ($1, $2, $3::bytea, $4, $5, 'in_progress', 'refund_created', -- bytea: see claimOrder
			        $6, nextval('refunds_id_seq'), $7, $8)
			ON CONFLICT (client_id, key) DO NOTHING
			RETURNING `+keyColumns,
			k.ClientID, k.Key, k.Fingerprint, k.Method, k.Path, k.LeaseExpiresAt, k.CreatedAt, k.ExpiresAt)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoKey
		}
		if err != nil {
			return fmt.Errorf("claim refund key: %w", err)
		}
		var order struct {
			ID       int64  `db:"id"`
			Currency string `db:"currency"`
		}
		err = tx.GetContext(ctx, &order, `
			UPDATE orders SET refunded_amount = refunded_amount + $3, updated_at = $4
			 WHERE public_id = $1 AND client_id = $2 AND status IN `+paidStatusesSQL+` -- a refunded one: the CHECK refuses
			RETURNING id, currency`, orderPublicID, k.ClientID, in.Amount, k.CreatedAt)
		switch {
		case db.IsCheckViolation(err, "orders_refund_within_capture"):
			return errExceedsCaptured()
		case errors.Is(err, sql.ErrNoRows):
			var status string
			err := tx.GetContext(ctx, &status, `SELECT status FROM orders WHERE public_id = $1 AND client_id = $2`, orderPublicID, k.ClientID)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrOrderNotFound
			}
			if err != nil {
				return fmt.Errorf("claim refund: %w", err)
			}
			return errNotRefundable(status)
		case err != nil:
			return fmt.Errorf("reserve refund amount: %w", err)
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO refunds (id, order_id, client_id, amount, currency, reason, status, provider_key,
			                     created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $8)`,
			row.RefundID.Int64, order.ID, k.ClientID, in.Amount, order.Currency, nullable(in.Reason),
			providerKey("refund", &row), k.CreatedAt)
		if err != nil {
			return fmt.Errorf("create refund: %w", err)
		}
		out, claimed = &row, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, claimed, nil
}

type refundRow struct {
	ID            int64     `db:"id"`
	PublicID      string    `db:"public_id"`
	OrderID       int64     `db:"order_id"`
	OrderPublicID string    `db:"order_public_id"`
	Amount        int64     `db:"amount"`
	Currency      string    `db:"currency"`
	Reason        string    `db:"reason"`
	CreatedAt     time.Time `db:"created_at"`
	ChargeID      string    `db:"provider_charge_id"`
}

func loadRefund(ctx context.Context, d sqlx.QueryerContext, id int64) (refundRow, error) {
	var r refundRow
	err := sqlx.GetContext(ctx, d, &r, `
		SELECT r.id, r.public_id, r.order_id, o.public_id AS order_public_id, r.amount, r.currency,
		       coalesce(r.reason, '') AS reason, r.created_at, p.provider_charge_id
		  FROM refunds r JOIN payments p ON p.order_id = r.order_id JOIN orders o ON o.id = r.order_id
		 WHERE r.id = $1`, id)
	if err != nil {
		return refundRow{}, fmt.Errorf("load refund %d: %w", id, err)
	}
	return r, nil
}

// completeRefund marks the refund done and stores the response, fenced like completeOrder.
// The same statement sets the order's status from its refunds: refunded once its refunds
// (this one and any other, finished or under way: refunded_amount reserves them) cover the
// capture, partially_refunded before. It reads the order row's own columns, so two refunds
// of one order finishing at once leave the status of the later one, read under its row
// lock, not of a snapshot taken before the other committed.
func completeRefund(ctx context.Context, d sqlx.QueryerContext, k *Key, resp Response, now time.Time, providerRefundID string) error {
	headers, err := jsonHeaders(resp)
	if err != nil {
		return err
	}
	var n int
	err = sqlx.GetContext(ctx, d, &n, `
		WITH k AS (`+completeKeySQL+`
		), r AS (
		    UPDATE refunds SET status = 'succeeded', provider_refund_id = $7, updated_at = $6
		     WHERE id = (SELECT refund_id FROM k)
		    RETURNING order_id
		), o AS (
		    UPDATE orders
		       SET status = CASE WHEN refunded_amount >= captured_amount THEN 'refunded' ELSE 'partially_refunded' END,
		           updated_at = $6
		     WHERE id = (SELECT order_id FROM r) AND status IN `+paidStatusesSQL+`
		)
		SELECT count(*) FROM k`,
		k.ID, k.LeaseToken, resp.Status, string(headers), resp.Body, now, providerRefundID)
	if err != nil {
		return fmt.Errorf("complete refund: %w", err)
	}
	if n == 0 {
		return errFenced
	}
	return nil
}

// view is the refund as the API shows it, with status.
func (r refundRow) view(status string) RefundView {
	return RefundView{ID: r.PublicID, OrderID: r.OrderPublicID, Amount: r.Amount, Currency: r.Currency,
		Status: status, Reason: r.Reason, CreatedAt: r.CreatedAt.UTC()}
}

// refundIDSyntax is the shape of a refund's public id, as the domain refund_public_id
// (migrations/00013_public_ids.sql) says.
var refundIDSyntax = regexp.MustCompile(`^rf_[0-9a-f]{32}$`)

// ErrRefundNotFound is a refund that the order (found) does not have.
var ErrRefundNotFound error = problem.Of(problem.CodeRefundNotFound)

// refundSelect reads the refunds of one of a client's orders ($1 its public id, $2 the
// client). The LEFT JOIN keeps the order's row when it has no refund (or not the one asked
// for), which tells an unknown order from an unknown refund in one query.
const refundSelect = `
	SELECT o.public_id AS order_public_id, r.public_id, r.amount, r.currency,
	       coalesce(r.reason, '') AS reason, r.status, r.created_at
	  FROM orders o LEFT JOIN refunds r ON r.order_id = o.id`

type refundViewRow struct {
	OrderPublicID string         `db:"order_public_id"`
	PublicID      sql.NullString `db:"public_id"`
	Amount        sql.NullInt64  `db:"amount"`
	Currency      sql.NullString `db:"currency"`
	Reason        string         `db:"reason"`
	Status        sql.NullString `db:"status"`
	CreatedAt     sql.NullTime   `db:"created_at"`
}

func (r refundViewRow) view() RefundView {
	row := refundRow{PublicID: r.PublicID.String, OrderPublicID: r.OrderPublicID, Amount: r.Amount.Int64,
		Currency: r.Currency.String, Reason: r.Reason, CreatedAt: r.CreatedAt.Time}
	return row.view(r.Status.String)
}

// GetRefund returns a refund of one of the client's orders: what the 201 that created it
// answered, with its status now. ErrOrderNotFound when the client has no such order (another
// client's included), ErrRefundNotFound when the order has no such refund; anything that is
// not a public id is not found, without a query.
func (s *Service) GetRefund(ctx context.Context, clientID int64, orderPublicID, refundPublicID string) (RefundView, error) {
	if !ValidOrderID(orderPublicID) {
		return RefundView{}, ErrOrderNotFound
	}
	if !refundIDSyntax.MatchString(refundPublicID) {
		refundPublicID = "" // no refund has it: only the order is looked up
	}
	var r refundViewRow
	err := sqlx.GetContext(ctx, s.db, &r, refundSelect+` AND r.public_id = $3::text
		 WHERE o.public_id = $1 AND o.client_id = $2`, orderPublicID, clientID, refundPublicID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return RefundView{}, ErrOrderNotFound
	case err != nil:
		return RefundView{}, fmt.Errorf("get refund: %w", err)
	case !r.PublicID.Valid:
		return RefundView{}, ErrRefundNotFound
	}
	return r.view(), nil
}

// ListRefunds returns the refunds of one of the client's orders, oldest first; all of them:
// an order has few, its captured amount bounds their sum. ErrOrderNotFound as GetRefund.
func (s *Service) ListRefunds(ctx context.Context, clientID int64, orderPublicID string) ([]RefundView, error) {
	if !ValidOrderID(orderPublicID) {
		return nil, ErrOrderNotFound
	}
	var rows []refundViewRow
	err := sqlx.SelectContext(ctx, s.db, &rows, refundSelect+`
		 WHERE o.public_id = $1 AND o.client_id = $2
		 ORDER BY r.id`, orderPublicID, clientID)
	if err != nil {
		return nil, fmt.Errorf("list refunds: %w", err)
	}
	if len(rows) == 0 {
		return nil, ErrOrderNotFound
	}
	out := make([]RefundView, 0, len(rows))
	for _, r := range rows {
		if r.PublicID.Valid {
			out = append(out, r.view())
		}
	}
	return out, nil
}
