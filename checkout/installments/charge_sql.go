package installments

import (
	"database/sql"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/outbox"
)

// The statements of a run: the claim of one due installment (dueInstallmentSQL, then
// takeInstallmentSQL) and the fenced record of its outcome with its event
// (installmentPaidSQL, installmentDeclinedSQL).

// installmentClaim is an installment a job run took: its row, its order and its client's zone.
type installmentClaim struct {
	OrderID      int64     `db:"order_id"`
	OrderPublic  string    `db:"order_public_id"` // what the provider is told (checkout.InstallmentDescription)
	N            int       `db:"n"`
	Amount       int64     `db:"amount"`
	DueOn        time.Time `db:"due_on"`
	Attempts     int       `db:"attempts"`
	InFlight     bool      `db:"in_flight"`
	LeaseToken   int64     `db:"lease_token"`
	Currency     string    `db:"currency"`
	OrderCreated time.Time `db:"order_created"`
	OrderIntent  []byte    `db:"order_intent"` // orders.intent: see checkout.InstallmentKey
	// ProviderCustomer is the customer the order's first charge was made with.
	ProviderCustomer sql.NullString `db:"provider_customer"`
	PaymentMethod    sql.NullString `db:"payment_method"`
	TimeZone         string         `db:"time_zone"`
	// TakenAt is when the attempt in flight was taken (its row's last update before this
	// claim): the upper bound of its first send, which a provider's key window counts from.
	TakenAt time.Time `db:"taken_at"`
	// Set by the claim: the attempt this run makes, and its provider key.
	Key     string `db:"-"`
	Resumed bool   `db:"-"` // the attempt was in flight before: look its charge up first
}

// dueInstallmentSQL picks one due installment of a paid order ($1 the job's now) whose lease
// is free ($2 the clock), locked, skipping those another run holds locked.
var dueInstallmentSQL = `
	SELECT i.order_id, i.n, i.amount, i.due_on, i.attempts, i.in_flight, i.lease_token, i.updated_at AS taken_at,
	       o.public_id AS order_public_id, o.currency, o.created_at AS order_created, o.intent AS order_intent, o.provider_customer, o.payment_method, c.time_zone
	  FROM installments i
	  JOIN orders o ON o.id = i.order_id
	  JOIN clients c ON c.id = o.client_id
	 WHERE i.status = 'scheduled' AND i.n > 1 AND i.next_attempt_at <= $1
	   AND (i.lease_expires_at IS NULL OR i.lease_expires_at <= $2)
	   AND o.status IN ` + checkout.PlanChargingStatuses.SQL() + `
	 ORDER BY i.next_attempt_at, i.order_id, i.n
	 LIMIT 1
	 FOR UPDATE OF i SKIP LOCKED`

// takeInstallmentSQL leases the picked installment for one attempt: a new one, or the one
// in flight again (same number, same key). The token grows at every take: the outcome of an
// earlier holder matches no row.
const takeInstallmentSQL = `
	UPDATE installments
	   SET attempts = $3, in_flight = true, provider_key = $4, lease_token = lease_token + 1,
	       lease_expires_at = $5, updated_at = $6
	 WHERE order_id = $1 AND n = $2
	RETURNING lease_token`

// installmentPaidSQL records a succeeded charge, fenced by the lease token, adds it to the
// order's captured amount and writes its installment.paid event, all in one statement: a
// run whose lease was taken over matches no row and writes nothing, no event either.
var installmentPaidSQL = `
	WITH i AS (
	    UPDATE installments
	       SET status = 'paid', in_flight = false, next_attempt_at = NULL, lease_expires_at = NULL,
	           provider_charge_id = $4, decline_code = NULL, paid_at = $5, updated_at = $5
	     WHERE order_id = $1 AND n = $2 AND lease_token = $3 AND in_flight AND status = 'scheduled'
	    RETURNING ` + installmentReturningSQL + `
	), o AS (
	    UPDATE orders o SET captured_amount = o.captured_amount + i.amount, updated_at = $5
	      FROM i WHERE o.id = i.order_id
	    RETURNING o.id, o.client_id, o.public_id, o.status, o.amount, o.currency, o.installments
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.InstallmentPaid) + `, o.id, ` + installmentPayloadSQL + `, $5
	      FROM i JOIN o ON o.id = i.order_id
	), e AS (` + outbox.InsertSQL + `
	)
	SELECT id FROM o`

// installmentDeclinedSQL records a declined attempt, fenced by the lease token: scheduled
// again at $4, or, when $4 is NULL, for an operator (status attention) for reason $7. The
// same statement writes its event: installment.declined (with the next attempt's time) or
// installment.needs_attention (with the reason).
var installmentDeclinedSQL = `
	WITH i AS (
	    UPDATE installments
	       SET status = CASE WHEN CAST($4 AS timestamptz) IS NULL THEN 'attention' ELSE 'scheduled' END,
	           next_attempt_at = $4, in_flight = false, lease_expires_at = NULL, decline_code = $5, updated_at = $6
	     WHERE order_id = $1 AND n = $2 AND lease_token = $3 AND in_flight AND status = 'scheduled'
	    RETURNING ` + installmentReturningSQL + `
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id,
	           CASE i.status WHEN 'attention' THEN ` + outbox.TypeSQL(outbox.InstallmentNeedsAttention) + ` ELSE ` + outbox.TypeSQL(outbox.InstallmentDeclined) + ` END,
	           o.id,
	           CASE i.status WHEN 'attention' THEN ` + installmentPayloadSQL + ` || jsonb_build_object('reason', CAST($7 AS text))
	                ELSE ` + installmentPayloadSQL + ` END,
	           $6
	      FROM i JOIN orders o ON o.id = i.order_id
	), e AS (` + outbox.InsertSQL + `
	)
	SELECT order_id FROM i`

// installmentReturningSQL is what the outcome statements return of the installment, for
// its event.
const installmentReturningSQL = `order_id, n, amount, due_on, status, attempts, provider_charge_id, decline_code, next_attempt_at`

// installmentPayloadSQL is the data of the installment events, from the order o (with its
// installments count) and the installment i as recorded: docs/outbox.md. next_attempt_at
// is a day's start in the client's zone, whole seconds, written in UTC.
const installmentPayloadSQL = checkout.OrderPayloadSQL + ` || jsonb_build_object('installment', jsonb_build_object(
	    'n', i.n, 'count', o.installments, 'amount', i.amount, 'due_on', to_char(i.due_on, 'YYYY-MM-DD'),
	    'status', i.status, 'attempts', i.attempts, 'charge', i.provider_charge_id, 'decline_code', i.decline_code,
	    'next_attempt_at', to_char(i.next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')))`
