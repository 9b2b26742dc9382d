package reconcile

import (
	"database/sql"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/db"
)

// The statements of reconciliation (reconcile.go). It owns reconciliation_runs and
// reconciliation_findings, and writes compensations and system entries of audit_log.

const startRunSQL = `
	INSERT INTO reconciliation_runs (process, scheduled, window_start, window_end, started_at)
	VALUES ($1, $2, $3, $4, $5)
	RETURNING id`

// runFinish is the parameters of finishRunSQL.
type runFinish struct {
	ID       int64          `db:"id"`
	Now      time.Time      `db:"now"`
	Seen     int            `db:"seen"`
	Orphans  int            `db:"orphans"`
	Created  int            `db:"created"`
	Refunds  int            `db:"refunds"`
	Mismatch int            `db:"mismatch"`
	Unpaid   int            `db:"unpaid"`
	Error    sql.NullString `db:"error"`
}

var finishRunSQL = db.Named[runFinish](`
	UPDATE reconciliation_runs
	   SET finished_at = :now, charges_seen = :seen, orphans = :orphans, compensations_created = :created,
	       refunds_made = :refunds, mismatches = :mismatch, paid_without_charge = :unpaid, error = :error
	 WHERE id = :id`)

// chargePayment is the payment tekrar recorded for a charge, with its order's amount.
type chargePayment struct {
	OrderID       int64  `db:"order_id"`
	ChargeID      string `db:"provider_charge_id"`
	Amount        int64  `db:"amount"`
	Currency      string `db:"currency"`
	OrderAmount   int64  `db:"order_amount"`
	OrderCurrency string `db:"order_currency"`
}

// chargePaymentSQL finds the payment of a charge ($1 id, $2 key); both columns are unique.
// An order paid in installments expects the installment's amount of each of its charges
// (its payment is the first installment's). A later installment's charge is known by its
// key while its attempt is the installment's current one, paid or still in flight: a rerun
// of the job records it. A charge of a canceled installment is no installment's.
const chargePaymentSQL = `
	SELECT p.order_id, p.provider_charge_id, p.amount, p.currency,
	       coalesce(i.amount, o.amount) AS order_amount, o.currency AS order_currency
	  FROM payments p JOIN orders o ON o.id = p.order_id
	  LEFT JOIN installments i ON i.order_id = o.id AND i.n = 1
	 WHERE p.provider_charge_id = $1 OR p.provider_key = $2
	UNION ALL
	SELECT i.order_id, $1, i.amount, o.currency, i.amount AS order_amount, o.currency AS order_currency
	  FROM installments i JOIN orders o ON o.id = i.order_id
	 WHERE i.n > 1 AND i.status <> 'canceled' AND (i.provider_charge_id = $1 OR i.provider_key = $2)
	 LIMIT 1`

// chargeOrder is the order a charge's description names, with the key row that created
// it, if that row is still there (NULL key columns when it was swept).
type chargeOrder struct {
	ID           int64          `db:"id"`
	PublicID     string         `db:"public_id"`
	ClientID     int64          `db:"client_id"`
	Status       string         `db:"status"`
	Amount       int64          `db:"amount"`
	Currency     string         `db:"currency"`
	KeyID        sql.NullInt64  `db:"key_id"`
	KeyClientID  sql.NullInt64  `db:"key_client_id"`
	Key          sql.NullString `db:"key"`
	KeyCreatedAt sql.NullTime   `db:"key_created_at"`
	KeyIntent    []byte         `db:"key_intent"`
}

// chargeOrderSQL reads order $1 and the key that created it (a refund's key names its
// refund, not the order).
const chargeOrderSQL = `
	SELECT o.id, o.public_id, o.client_id, o.status, o.amount, o.currency,
	       k.id AS key_id, k.client_id AS key_client_id, k.key, k.created_at AS key_created_at,
	       k.intent AS key_intent
	  FROM orders o LEFT JOIN idempotency_keys k ON k.order_id = o.id
	 WHERE o.id = $1`

// orphanCompensation is the parameters of oweOrphanSQL.
type orphanCompensation struct {
	ClientID   sql.NullInt64 `db:"client_id"`
	OrderID    sql.NullInt64 `db:"order_id"`
	ChargeKey  string        `db:"charge_key"`
	ChargeID   string        `db:"charge_id"`
	Reason     string        `db:"reason"`
	Now        time.Time     `db:"now"`
	WatchUntil time.Time     `db:"watch_until"`
	Actor      string        `db:"actor"`
	Target     string        `db:"target"`
	Detail     string        `db:"detail"` // JSON
}

// oweOrphanSQL writes the refund owed for a charge of no completable order, once per charge
// key whoever writes it (a concurrent run, a rerun, the cancel of the order the charge
// was for), and audits it in the same statement when this call wrote it. An existing
// compensation of the charge is made due now, and one that had settled as no_charge (the
// charge appeared after the watch ended) watches again; a refunded or already_refunded one (nothing
// more can be owed of the charge) is left alone and returns no row. Its compensation.created
// event is written by the same statement (docs/outbox.md).
var oweOrphanSQL = db.Named[orphanCompensation](`
	WITH c AS (
	    INSERT INTO compensations (client_id, order_id, charge_key, reason, source, charge_id,
	                               next_attempt_at, watch_until, created_at)
	    VALUES (:client_id, :order_id, :charge_key, :reason, 'reconcile', :charge_id, :now, :watch_until, :now)
	    ON CONFLICT (charge_key) DO UPDATE
	       SET state = CASE WHEN compensations.state = 'disputed' THEN 'disputed' ELSE 'watching' END, settled_at = NULL,
	           charge_id = coalesce(compensations.charge_id, excluded.charge_id),
	           next_attempt_at = least(compensations.next_attempt_at, excluded.next_attempt_at),
	           watch_until = greatest(compensations.watch_until, excluded.watch_until)
	     WHERE compensations.state NOT IN ('refunded', 'already_refunded', 'dispute_lost')
	    RETURNING id, order_id, reason, xmax = 0 AS inserted
	), a AS (
	    INSERT INTO audit_log (at, actor, action, target, detail)
	    SELECT :now, :actor, 'compensate_orphan_charge', :target, CAST(:detail AS jsonb) FROM c WHERE c.inserted
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    -- A charge of an order tells the order's client, as any compensation does; a charge of
	    -- no order belongs to no client, and no client is told.
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.CompensationCreated) + `, o.id, ` + checkout.CompensationPayloadSQL + `, :now
	      FROM c JOIN orders o ON o.id = c.order_id
	     WHERE c.inserted
	), e AS (` + outbox.InsertSQL + `
	)
	SELECT id, inserted FROM c`)

// finding is a row of reconciliation_findings as a run writes it.
type finding struct {
	Kind             string         `db:"kind"`
	ChargeID         string         `db:"charge_id"`
	ChargeKey        sql.NullString `db:"charge_key"`
	OrderID          sql.NullInt64  `db:"order_id"`
	ProviderAmount   sql.NullInt64  `db:"provider_amount"`
	ProviderCurrency sql.NullString `db:"provider_currency"`
	OrderAmount      sql.NullInt64  `db:"order_amount"`
	OrderCurrency    sql.NullString `db:"order_currency"`
	Detail           string         `db:"detail"`
	RunID            int64          `db:"run_id"`
	Now              time.Time      `db:"now"`
}

// recordFindingSQL writes a finding once per (kind, charge); a rerun only notes that it saw
// it again.
var recordFindingSQL = db.Named[finding](`
	INSERT INTO reconciliation_findings (kind, charge_id, charge_key, order_id, provider_amount, provider_currency,
	                                     order_amount, order_currency, detail, first_run_id, last_run_id,
	                                     found_at, last_seen_at)
	VALUES (:kind, :charge_id, :charge_key, :order_id, :provider_amount, :provider_currency,
	        :order_amount, :order_currency, :detail, :run_id, :run_id, :now, :now)
	ON CONFLICT (kind, charge_id) DO UPDATE
	   SET last_run_id = excluded.last_run_id, last_seen_at = excluded.last_seen_at`)

// paidOrder is a paid order of the window with the charge its payment names.
type paidOrder struct {
	OrderID   int64  `db:"order_id"`
	ChargeID  string `db:"provider_charge_id"`
	ChargeKey string `db:"provider_key"`
	Amount    int64  `db:"amount"`
	Currency  string `db:"currency"`
	// The order's public id and creation: how a provider without keys finds its charge.
	PublicID string    `db:"public_id"`
	Created  time.Time `db:"created_at"`
}

// paidOrdersSQL lists the orders created in [$1, $2) that tekrar holds as charged, client by
// client through orders_client_created_idx, after order $3 (a page of $4).
var paidOrdersSQL = `
	SELECT o.id AS order_id, p.provider_charge_id, p.provider_key, p.amount, p.currency, o.public_id, o.created_at
	  FROM clients c
	 CROSS JOIN LATERAL (
	    SELECT id, public_id, created_at FROM orders
	     WHERE client_id = c.id AND created_at >= $1 AND created_at < $2
	       AND status IN ` + checkout.ChargedStatuses.SQL() + `) o
	  JOIN payments p ON p.order_id = o.id AND p.status = 'succeeded'
	 WHERE o.id > $3
	 ORDER BY o.id
	 LIMIT $4`
