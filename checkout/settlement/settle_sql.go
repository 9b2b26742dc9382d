package settlement

import "time"

// The statements of settlement (settle.go). It owns settlements, settlement_totals and
// settlement_items (migration 00029), and reads the tables of the money movements:
// payments, installments, refunds, order_disputes and compensations.

// settleLockClass is the first key of the advisory lock that lets one settlement
// transaction at a time work on a client ("se" in ASCII); the second is the client id.
const settleLockClass = 0x7365

// settleLockSQL takes the client's settlement lock until the transaction ends. The client
// id is folded into an int4: two clients sharing a lock only wait for each other.
const settleLockSQL = `SELECT pg_advisory_xact_lock($1, CAST($2 % 2147483647 AS integer))`

// settlementRow is a row of settlements.
type settlementRow struct {
	ID        int64     `db:"id"`
	ClientID  int64     `db:"client_id"`
	Day       time.Time `db:"day"`
	TimeZone  string    `db:"time_zone"`
	StartsAt  time.Time `db:"starts_at"`
	EndsAt    time.Time `db:"ends_at"`
	SettledAt time.Time `db:"settled_at"`
	Process   string    `db:"process"`
}

const settlementColumns = `id, client_id, day, time_zone, starts_at, ends_at, settled_at, process`

// findSettlementSQL reads the settlement of client $1 and day $2.
const findSettlementSQL = `SELECT ` + settlementColumns + ` FROM settlements WHERE client_id = $1 AND day = $2`

// insertSettlementSQL writes the settlement of a day, unless it exists (then no row).
const insertSettlementSQL = `
	INSERT INTO settlements (client_id, day, time_zone, starts_at, ends_at, settled_at, process)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (client_id, day) DO NOTHING
	RETURNING ` + settlementColumns

// movement is a money movement of a client, as settlement counts it.
type movement struct {
	Kind       string    `db:"kind"`
	SourceID   int64     `db:"source_id"`
	OccurredAt time.Time `db:"occurred_at"`
	Amount     int64     `db:"amount"`
	Currency   string    `db:"currency"`
	OrderID    *int64    `db:"order_id"`
}

// unclaimedMovementsSQL lists the money movements of client $1 that count at an instant
// in [$2, $3) and that no settlement has claimed, oldest first. What counts when:
//
//   - a capture: the succeeded payment, when tekrar recorded it (payments.created_at);
//   - an installment: an installment after the first (the first is the order's payment),
//     when tekrar recorded it paid (installments.paid_at);
//   - a refund: a succeeded refund, when it succeeded (refunds.updated_at, which the
//     statement that marks it succeeded sets, and nothing changes afterwards; a refund made
//     at the provider is recorded succeeded when its event arrives);
//   - a dispute: when the provider says it was opened (order_disputes.opened_at), so that
//     a webhook delivered late still counts on the day the money was held. That instant is
//     the provider's, not tekrar's, and may be any time before the dispute is recorded, so
//     disputes are looked for from $4, not $2: a day's own window passes its start, the late
//     pass NULL, no lower bound;
//   - a compensation: when its refund was recorded (compensations.settled_at, state
//     refunded). A compensation of a charge of no order belongs to no client.
const unclaimedMovementsSQL = `
	SELECT m.kind, m.source_id, m.occurred_at, m.amount, m.currency, m.order_id FROM (
	    SELECT 'capture' AS kind, p.order_id AS source_id, p.created_at AS occurred_at, p.amount, p.currency,
	           p.order_id
	      FROM payments p JOIN orders o ON o.id = p.order_id
	     WHERE o.client_id = $1 AND p.status = 'succeeded' AND p.created_at >= $2 AND p.created_at < $3
	    UNION ALL
	    SELECT 'installment', i.id, i.paid_at, i.amount, o.currency, i.order_id
	      FROM installments i JOIN orders o ON o.id = i.order_id
	     WHERE o.client_id = $1 AND i.status = 'paid' AND i.n > 1 AND i.paid_at >= $2 AND i.paid_at < $3
	    UNION ALL
	    SELECT 'refund', r.id, r.updated_at, r.amount, r.currency, r.order_id
	      FROM refunds r
	     WHERE r.client_id = $1 AND r.status = 'succeeded' AND r.updated_at >= $2 AND r.updated_at < $3
	    UNION ALL
	    SELECT 'dispute', d.id, d.opened_at, d.amount, o.currency, d.order_id
	      FROM order_disputes d JOIN orders o ON o.id = d.order_id
	     WHERE o.client_id = $1 AND d.opened_at >= COALESCE(CAST($4 AS timestamptz), '-infinity')
	       AND d.opened_at < $3
	    UNION ALL
	    SELECT 'compensation', c.id, c.settled_at, c.amount, c.currency, c.order_id
	      FROM compensations c
	     WHERE c.client_id = $1 AND c.state = 'refunded' AND c.settled_at >= $2 AND c.settled_at < $3
	) m
	 WHERE NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = m.kind AND i.source_id = m.source_id)
	 ORDER BY m.occurred_at, m.kind, m.source_id`

// settledDaysSQL lists the days of client $1 from $2 on that have a settlement.
const settledDaysSQL = `SELECT day FROM settlements WHERE client_id = $1 AND day >= $2`

// claimItemsSQL claims movements for settlement $2 of client $1, one array element per
// movement; a movement claimed already (the primary key) is left to its settlement, and
// only the claimed ones come back.
const claimItemsSQL = `
	INSERT INTO settlement_items (kind, source_id, client_id, settlement_id, day, adjusted, occurred_at, amount,
	                              currency, order_id)
	SELECT u.kind, u.source_id, $1, $2, u.day, u.adjusted, u.occurred_at, u.amount, u.currency, nullif(u.order_id, 0)
	  FROM unnest(CAST($3 AS text[]), CAST($4 AS bigint[]), CAST($5 AS date[]), CAST($6 AS boolean[]),
	              CAST($7 AS timestamptz[]), CAST($8 AS bigint[]), CAST($9 AS text[]), CAST($10 AS bigint[]))
	       AS u (kind, source_id, day, adjusted, occurred_at, amount, currency, order_id)
	ON CONFLICT (kind, source_id) DO NOTHING
	RETURNING kind, source_id, day, adjusted, occurred_at, amount, currency, order_id`

// insertTotalsSQL writes a settlement's figures of one currency.
const insertTotalsSQL = `
	INSERT INTO settlement_totals (settlement_id, currency, captured_amount, captured_count, refunded_amount,
	                               refunded_count, disputed_amount, disputed_count, compensated_amount,
	                               compensated_count)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// Total is a settlement's figures of one currency, in its minor units.
type Total struct {
	Currency          string `db:"currency"`
	CapturedAmount    int64  `db:"captured_amount"`
	CapturedCount     int    `db:"captured_count"`
	RefundedAmount    int64  `db:"refunded_amount"`
	RefundedCount     int    `db:"refunded_count"`
	DisputedAmount    int64  `db:"disputed_amount"`
	DisputedCount     int    `db:"disputed_count"`
	CompensatedAmount int64  `db:"compensated_amount"`
	CompensatedCount  int    `db:"compensated_count"`
}

// totalsSQL reads the figures of settlement $1, by currency.
const totalsSQL = `
	SELECT currency, captured_amount, captured_count, refunded_amount, refunded_count, disputed_amount,
	       disputed_count, compensated_amount, compensated_count
	  FROM settlement_totals WHERE settlement_id = $1 ORDER BY currency`

// itemCountsSQL counts the items settlement $1 claimed: its own day's and its adjustments.
const itemCountsSQL = `
	SELECT count(*) FILTER (WHERE NOT adjusted) AS own, count(*) FILTER (WHERE adjusted) AS adjusted
	  FROM settlement_items WHERE settlement_id = $1`

// dueClient is a client whose days SettleDue looks at.
type dueClient struct {
	ID        int64     `db:"id"`
	TimeZone  string    `db:"time_zone"`
	CreatedAt time.Time `db:"created_at"`
}

const dueClientsSQL = `SELECT id, time_zone, created_at FROM clients ORDER BY id`

// clientZoneSQL reads client $1's time zone.
const clientZoneSQL = `SELECT time_zone FROM clients WHERE id = $1`
