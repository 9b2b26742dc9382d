package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
)

// refundClaim is the parameters of the statements of claimRefund: the key row, the order
// (its public id) and the amount to reserve on it.
type refundClaim struct {
	keyClaim
	OrderPublicID string         `db:"order_public_id"`
	Amount        int64          `db:"amount"`
	Reason        sql.NullString `db:"reason"`
	RefundID      int64          `db:"refund_id"`    // made by claimRefundKeySQL
	OrderID       int64          `db:"order_id"`     // and the order's, by reserveRefundSQL
	Currency      string         `db:"currency"`     // the order's
	ProviderKey   string         `db:"provider_key"` // providerKey("refund", the key row)
}

// refundTombstoneSQL selects a live tombstone of the key (keyed.TombstoneSQL): a key that has
// a tombstone cannot be claimed again. claimOrderSQL has the same step, as its CTE t.
var refundTombstoneSQL = named[refundClaim](keyed.TombstoneSQL)

var claimRefundKeySQL = named[refundClaim](`
	INSERT INTO idempotency_keys
	       (client_id, key, fingerprint, method, path, state, recovery_point,
	        lease_expires_at, refund_id, created_at, expires_at, scope_fingerprint, card_fingerprint, intent)
	VALUES (:client_id, :key, CAST(:fingerprint AS bytea), :method, :path, 'in_progress', 'refund_created', -- bytea, see claimOrder
	        :lease_expires_at, nextval('refunds_id_seq'), :created_at, :expires_at,
	        CAST(:scope_fingerprint AS bytea), :card_fingerprint, ` + refundIntentSQL + `)
	ON CONFLICT (client_id, key) DO NOTHING
	RETURNING ` + keyed.Columns)

// reserveRefundSQL: a refunded order is not left out: the CHECK refuses it. An order
// without a provider charge (a register's sale paid in cash or on its terminal) is: there is
// nothing for the provider to refund.
var reserveRefundSQL = named[refundClaim](`
	UPDATE orders SET refunded_amount = refunded_amount + :amount, updated_at = :created_at
	 WHERE public_id = :order_public_id AND client_id = :client_id AND status IN ` + RefundableStatuses.SQL() + `
	   AND EXISTS (SELECT 1 FROM payments p WHERE p.order_id = orders.id)
	RETURNING id AS order_id, currency`)

// createRefundSQL inserts the pending refund and its refund.created event.
var createRefundSQL = named[refundClaim](`
	WITH r AS (
	    INSERT INTO refunds (id, order_id, client_id, amount, currency, reason, status, provider_key,
	                         created_at, updated_at)
	    VALUES (:refund_id, :order_id, :client_id, :amount, :currency, :reason, 'pending', :provider_key,
	            :created_at, :created_at)
	    RETURNING order_id, client_id, public_id, amount, currency, status
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT r.client_id, ` + outbox.TypeSQL(outbox.RefundCreated) + `, r.order_id, ` + refundPayloadSQL + `, :created_at
	      FROM r JOIN orders o ON o.id = r.order_id
	)` + outbox.InsertSQL)

// refundPayloadSQL is refund.created's data, from the refund r and its order o:
// docs/outbox.md.
const refundPayloadSQL = `jsonb_build_object('order', o.public_id, 'refund', r.public_id, 'status', r.status,
	'amount', r.amount, 'currency', r.currency)`

// orderRefundedPayloadSQL is order.refunded's data, from the order o after the refund r:
// docs/outbox.md.
const orderRefundedPayloadSQL = `jsonb_build_object('order', o.public_id, 'status', o.status, 'amount', o.amount,
	'currency', o.currency, 'refund', r.public_id, 'refund_amount', r.amount, 'refunded_amount', o.refunded_amount)`

// claimRefund inserts the key row, reserves the amount on the order and creates the
// pending refund, in one transaction. The order is named by its public id (the path's);
// the refund's public id is the default of refunds.public_id, made by its INSERT. The reservation is an UPDATE of the order's
// refunded_amount, so concurrent refunds of one order queue on its row lock, and the
// CHECK orders_refund_within_capture refuses the one that would exceed the capture.
func claimRefund(ctx context.Context, d *sqlx.DB, k *Key, orderPublicID string, in RefundInput) (_ *Key, claimed bool, _ error) {
	if !ValidOrderID(orderPublicID) {
		return nil, false, ErrOrderNotFound
	}
	p := refundClaim{keyClaim: claimOf(k, "refund"), OrderPublicID: orderPublicID, Amount: in.Amount, Reason: nullString(in.Reason)}
	var out *Key
	err := inTx(ctx, d, "claim refund", func(tx *sqlx.Tx) error {
		var tomb Key
		err := refundTombstoneSQL.get(ctx, tx, &tomb, p)
		if err == nil {
			out = &tomb
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("claim refund: tombstone: %w", err)
		}
		var row Key
		err = claimRefundKeySQL.get(ctx, tx, &row, p)
		if errors.Is(err, sql.ErrNoRows) {
			return keyed.ErrNoKey
		}
		if err != nil {
			return fmt.Errorf("claim refund key: %w", err)
		}
		p.RefundID, p.ProviderKey = row.RefundID.Int64, providerKey("refund", &row)
		if err := lockInstallments(ctx, tx, orderPublicID, k.ClientID); err != nil {
			return err
		}
		err = reserveRefundSQL.get(ctx, tx, &p, p)
		switch {
		case db.IsCheckViolation(err, "orders_refund_within_capture"):
			return errExceedsCaptured()
		case errors.Is(err, sql.ErrNoRows):
			var o struct {
				Status  string `db:"status"`
				Charged bool   `db:"charged"`
			}
			err := tx.GetContext(ctx, &o, `SELECT status, EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id) AS charged
				FROM orders o WHERE public_id = $1 AND client_id = $2`, orderPublicID, k.ClientID)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrOrderNotFound
			}
			if err != nil {
				return fmt.Errorf("claim refund: %w", err)
			}
			if !o.Charged && o.Status == StatusPaid {
				return problem.Of(problem.CodeOrderNotRefundable).
					WithDetail("this order is a register's sale paid in cash or on its terminal: there is no charge to refund; refund it at the register").Advised()
			}
			return errNotRefundable(o.Status)
		case err != nil:
			return fmt.Errorf("reserve refund amount: %w", err)
		}
		if _, err := createRefundSQL.exec(ctx, tx, p); err != nil {
			return fmt.Errorf("create refund: %w", err)
		}
		if err := cancelInstallments(ctx, tx, p.OrderID, k.CreatedAt); err != nil {
			return err
		}
		if in.Restock {
			if err := restock(ctx, tx, p.OrderID, p.RefundID, in.RestockItems, k.CreatedAt); err != nil {
				return err
			}
		}
		out, claimed = &row, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, claimed, nil
}

// refund is a row of refunds with what checkout needs of its order: the order's public id
// (what clients see) and its charge (what the provider refunds). The one shape checkout
// reads a refund in, with refundSelect.
type refund struct {
	ID            int64          `db:"id"`
	PublicID      string         `db:"public_id"`
	OrderID       int64          `db:"order_id"`
	OrderPublicID string         `db:"order_public_id"`
	ClientID      int64          `db:"client_id"`
	Amount        int64          `db:"amount"`
	Currency      string         `db:"currency"`
	Reason        sql.NullString `db:"reason"`
	Status        string         `db:"status"`
	CreatedAt     time.Time      `db:"created_at"`
	ChargeID      string         `db:"provider_charge_id"`
}

// refundSelect reads refunds; its callers add the WHERE clause (and ORDER BY). A refund is
// only ever made for a charged order, so its order has a payment.
const refundSelect = `
	SELECT r.id, r.public_id, r.order_id, o.public_id AS order_public_id, r.client_id, r.amount,
	       r.currency, r.reason, r.status, r.created_at, p.provider_charge_id
	  FROM refunds r JOIN orders o ON o.id = r.order_id JOIN payments p ON p.order_id = r.order_id`

func loadRefund(ctx context.Context, d sqlx.QueryerContext, id int64) (refund, error) {
	var r refund
	if err := sqlx.GetContext(ctx, d, &r, refundSelect+` WHERE r.id = $1`, id); err != nil {
		return refund{}, fmt.Errorf("load refund %d: %w", id, err)
	}
	return r, nil
}

// refundCompletion is the parameters of completeRefundSQL.
type refundCompletion struct {
	keyed.SetState
	ProviderRefundID string `db:"provider_refund_id"`
}

// completeRefundSQL: see completeRefund. Each later step reads the key's refund_id from
// k, so it does nothing when the fence matched no row.
var completeRefundSQL = named[refundCompletion](`
	WITH k AS (` + keyed.SetStateSQL + `
	    RETURNING refund_id
	), r AS (
	    UPDATE refunds SET status = 'succeeded', provider_refund_id = :provider_refund_id, updated_at = :now
	     WHERE id = (SELECT refund_id FROM k)
	    RETURNING order_id, public_id, amount
	), u AS (
	    UPDATE orders
	       SET status = CASE WHEN refunded_amount >= captured_amount THEN 'refunded' ELSE 'partially_refunded' END,
	           updated_at = :now
	     WHERE id = (SELECT order_id FROM r) AND status IN ` + RefundableStatuses.SQL() + `
	    RETURNING id, status
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    -- A disputed order keeps its status (u matches nothing), and the event says so.
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.OrderRefunded) + `, o.id, ` + orderRefundedPayloadSQL + `, :now
	      FROM r JOIN (SELECT x.id, x.client_id, x.public_id, coalesce(u.status, x.status) AS status, x.amount,
	                          x.currency, x.refunded_amount
	                     FROM orders x LEFT JOIN u ON u.id = x.id) o ON o.id = r.order_id
	), e AS (` + outbox.InsertSQL + `
	)
	SELECT count(*) FROM k`)

// completeRefund marks the refund done and stores the response, fenced like completeOrder.
// The same statement sets the order's status from its refunds: refunded once its refunds
// (this one and any other, finished or under way: refunded_amount reserves them) cover the
// capture, partially_refunded before. It reads the order row's own columns, so two refunds
// of one order finishing at once leave the status of the later one, read under its row
// lock, not of a snapshot taken before the other committed.
func completeRefund(ctx context.Context, d sqlx.QueryerContext, k *Key, resp Response, now time.Time, providerRefundID string) error {
	kc, err := keyed.Complete(k, resp, now)
	if err != nil {
		return err
	}
	var n int
	if err := completeRefundSQL.get(ctx, d, &n, refundCompletion{SetState: kc, ProviderRefundID: providerRefundID}); err != nil {
		return fmt.Errorf("complete refund: %w", err)
	}
	if n == 0 {
		return keyed.ErrFenced
	}
	return nil
}

// view is the refund as the API shows it, with status (a stored answer names the status
// it answers with, not the row's of the moment).
func (r *refund) view(status string) RefundView {
	return RefundView{ID: r.PublicID, OrderID: r.OrderPublicID, Amount: r.Amount, Currency: r.Currency,
		Status: status, Reason: r.Reason.String, CreatedAt: r.CreatedAt.UTC()}
}

// refundIDSyntax is the shape of a refund's public id, as the domain refund_public_id
// (migrations/00013_public_ids.sql) says.
var refundIDSyntax = regexp.MustCompile(`^rf_[0-9a-f]{32}$`)

// ErrRefundNotFound is a refund that the order (found) does not have.
var ErrRefundNotFound error = problem.Of(problem.CodeRefundNotFound)

// orderOfClient reports whether the client has the order: what tells an unknown order from
// an order without the refund asked for, once the refunds' query found none.
func orderOfClient(ctx context.Context, d sqlx.QueryerContext, clientID int64, orderPublicID string) (bool, error) {
	var ok bool
	err := sqlx.GetContext(ctx, d, &ok,
		`SELECT EXISTS (SELECT 1 FROM orders WHERE public_id = $1 AND client_id = $2)`, orderPublicID, clientID)
	return ok, err
}

// GetRefund returns a refund of one of the client's orders: what the 201 that created it
// answered, with its status now. ErrOrderNotFound when the client has no such order (another
// client's included), ErrRefundNotFound when the order has no such refund; anything that is
// not a public id is not found, without a query.
func (s *Service) GetRefund(ctx context.Context, clientID int64, orderPublicID, refundPublicID string) (RefundView, error) {
	if !ValidOrderID(orderPublicID) {
		return RefundView{}, ErrOrderNotFound
	}
	var r refund
	err := sql.ErrNoRows
	if refundIDSyntax.MatchString(refundPublicID) { // else no refund has it: only the order is looked up
		err = sqlx.GetContext(ctx, s.db, &r, refundSelect+`
			 WHERE o.public_id = $1 AND o.client_id = $2 AND r.public_id = $3`, orderPublicID, clientID, refundPublicID)
	}
	if errors.Is(err, sql.ErrNoRows) {
		ok, err := orderOfClient(ctx, s.db, clientID, orderPublicID)
		switch {
		case err != nil:
			return RefundView{}, fmt.Errorf("get refund: %w", err)
		case !ok:
			return RefundView{}, ErrOrderNotFound
		}
		return RefundView{}, ErrRefundNotFound
	}
	if err != nil {
		return RefundView{}, fmt.Errorf("get refund: %w", err)
	}
	return r.view(r.Status), nil
}

// ListRefunds returns the refunds of one of the client's orders, oldest first; all of them:
// an order has few, its captured amount bounds their sum. ErrOrderNotFound as GetRefund.
func (s *Service) ListRefunds(ctx context.Context, clientID int64, orderPublicID string) ([]RefundView, error) {
	if !ValidOrderID(orderPublicID) {
		return nil, ErrOrderNotFound
	}
	var rows []refund
	err := sqlx.SelectContext(ctx, s.db, &rows, refundSelect+`
		 WHERE o.public_id = $1 AND o.client_id = $2
		 ORDER BY r.id`, orderPublicID, clientID)
	if err != nil {
		return nil, fmt.Errorf("list refunds: %w", err)
	}
	if len(rows) == 0 {
		ok, err := orderOfClient(ctx, s.db, clientID, orderPublicID)
		if err != nil {
			return nil, fmt.Errorf("list refunds: %w", err)
		}
		if !ok {
			return nil, ErrOrderNotFound
		}
	}
	out := make([]RefundView, 0, len(rows))
	for i := range rows {
		out = append(out, rows[i].view(rows[i].Status))
	}
	return out, nil
}

// lockRefundKeySQL locks the key row of a refund this worker still holds (its lease token),
// for a settlement of several statements: a key taken over meanwhile has no row here.
const lockRefundKeySQL = `
	SELECT refund_id FROM idempotency_keys
	 WHERE id = $1 AND lease_token = $2 AND state = 'in_progress' AND refund_id IS NOT NULL
	   FOR UPDATE`

// failRefundSQL ends a refund the provider refused: failed, and its amount, reserved on the
// order when it was claimed, freed. The order's status follows what is left reserved or
// refunded, as completeRefundSQL sets it (another refund finishing meanwhile counted this
// one's reservation); a disputed order keeps its status. It returns the order's id, or no
// row when the refund was not pending.
var failRefundSQL = `
	WITH r AS (
	    UPDATE refunds SET status = 'failed', updated_at = $2
	     WHERE id = $1 AND status = 'pending'
	    RETURNING id, order_id, amount
	)
	UPDATE orders o SET refunded_amount = o.refunded_amount - r.amount, updated_at = $2,
	       status = CASE WHEN o.status NOT IN ` + RefundableStatuses.SQL() + ` THEN o.status
	                     WHEN o.refunded_amount - r.amount >= o.captured_amount THEN 'refunded'
	                     WHEN EXISTS (SELECT 1 FROM refunds x WHERE x.order_id = o.id AND x.id <> r.id
	                                     AND x.status = 'succeeded') THEN 'partially_refunded'
	                     ELSE 'paid' END
	  FROM r WHERE o.id = r.order_id
	RETURNING o.id`

// providerRefundsSQL records on an order ($1) the refunds its charge had at the provider
// beyond what the order counts, as one refund of its own, when the provider says the charge
// is refunded $2 in all: refunds made at the provider, outside tekrar (its dashboard, a
// support agent). The order's refunded amount counts tekrar's own refunds from the moment
// they are claimed, so a refund of tekrar's the provider reports before tekrar recorded its
// answer is not counted twice; whatever the provider reports beyond it is recorded once,
// whoever reports it (a webhook, or a refusal that made tekrar look the charge up) and in
// whatever order, because the comparison is of totals. $3 is the recorded refund's
// provider_key (unique: "provider:" and who reported it), $4 the time. $5 and $6 are the id
// and amount of the provider's refund that the report is of (a refund.succeeded event's),
// NULL when it names none: the recorded refund takes that id when it is that refund alone
// (the same amount) and no refund holds the id already; one recorded for several refunds at
// once, or from a report of totals only, has no provider refund id.
var providerRefundsSQL = `
	WITH o AS (
	    SELECT id, client_id, currency, $2::bigint - refunded_amount AS missing
	      FROM orders
	     WHERE id = $1 AND (status IN ` + ChargedStatuses.SQL() + `) AND refunded_amount < $2
	       AND $2 <= captured_amount
	     FOR UPDATE
	), r AS (
	    INSERT INTO refunds (order_id, client_id, amount, currency, reason, status, provider_key, provider_refund_id,
	                         created_at, updated_at)
	    SELECT id, client_id, missing, currency, 'refunded at the payment provider', 'succeeded', $3,
	           CASE WHEN missing = $6::bigint AND NOT EXISTS (SELECT 1 FROM refunds WHERE provider_refund_id = $5::text)
	                THEN $5::text END,
	           $4, $4 FROM o
	    RETURNING order_id, client_id, public_id, amount, currency, status
	), i AS (
	    -- Any refund cancels a plan's unpaid installments, as a refund through tekrar does.
	    -- One being charged right now is canceled too: this refund cannot be refused, and
	    -- its charge, if the provider makes it, belongs to no installment and is refunded
	    -- by reconciliation as any orphan charge is.
	    UPDATE installments SET status = 'canceled', in_flight = false, next_attempt_at = NULL,
	           lease_expires_at = NULL, updated_at = $4
	     WHERE order_id IN (SELECT order_id FROM r) AND status IN ('scheduled', 'attention')
	), u AS (
	    UPDATE orders SET refunded_amount = $2, updated_at = $4,
	           status = CASE WHEN status = 'disputed' THEN 'disputed'
	                         WHEN $2 >= captured_amount THEN 'refunded' ELSE 'partially_refunded' END
	     WHERE id IN (SELECT id FROM o)
	    RETURNING id, client_id, public_id, status, amount, currency, refunded_amount
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.RefundCreated) + `, o.id, ` + refundPayloadSQL + `, $4 FROM r JOIN u o ON o.id = r.order_id
	    UNION ALL
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.OrderRefunded) + `, o.id, ` + orderRefundedPayloadSQL + `, $4 FROM r JOIN u o ON o.id = r.order_id
	)` + outbox.InsertSQL

// completeKeySQL stores a key's final answer, fenced by its lease token, for a settlement
// whose other statements ran before it in the same transaction.
var completeKeySQL = named[keyed.SetState](keyed.SetStateSQL)
