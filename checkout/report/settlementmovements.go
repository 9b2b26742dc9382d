package report

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// The movements behind one settled day (settlement_items, migration 00029): what an
// operator reads when "yesterday's settlement looks wrong". A settlement's items are the
// claims its transaction wrote, each with the amount, currency and instant it was counted
// at, so the list is exactly what the stored totals were added from, never a recomputation
// from today's orders. Three parts:
//
//   - own: the movements of the day, which its totals add up;
//   - adjustment: movements of earlier, settled days that this settlement counted because
//     they were recorded after their own day was settled (not in its totals);
//   - late: movements of this day recorded after it was settled, counted by a later
//     settlement as its adjustments (not in this day's totals either).

// Parts of a settled day's movements, in the order they are listed.
const (
	MovementOwn        = "own"
	MovementAdjustment = "adjustment"
	MovementLate       = "late"
)

// SettlementMovement is one movement of a settled day's page.
type SettlementMovement struct {
	Part          string    `db:"part"` // MovementOwn, MovementAdjustment or MovementLate
	Kind          string    `db:"kind"` // capture, installment, refund, dispute, compensation
	SourceID      int64     `db:"source_id"`
	Day           string    `db:"day"` // the day it belongs to, YYYY-MM-DD
	OccurredAt    time.Time `db:"occurred_at"`
	Amount        int64     `db:"amount"`
	Currency      string    `db:"currency"`
	OrderPublicID *string   `db:"order_public_id"` // nil: a compensation of no order
	OrderStatus   *string   `db:"order_status"`    // the order's status now, not the day's
	CountedBy     int64     `db:"counted_by"`      // the settlement that claimed it
	CountedOn     string    `db:"counted_on"`      // that settlement's day
}

// MovementSum is the sum of one part, kind and currency of a settled day's movements,
// over all of them (the page lists at most a limit; the sums never stop short).
type MovementSum struct {
	Part     string `db:"part"`
	Kind     string `db:"kind"`
	Currency string `db:"currency"`
	Count    int    `db:"count"`
	Amount   int64  `db:"amount"`
}

// SettlementMovementLimit bounds the movements a settled day's page lists; the CSV export
// streams every one.
const SettlementMovementLimit = 2000

// settlementMovementsFrom is the three parts of settlement $1 (of client $2 and day $3),
// each read through an index of settlement_items: its own items and adjustments by
// settlement, the late items of its day by (client_id, day) WHERE adjusted.
const settlementMovementsFrom = `
	FROM (
	    SELECT CASE WHEN i.adjusted THEN 'adjustment' ELSE 'own' END AS part, i.*
	      FROM settlement_items i WHERE i.settlement_id = $1
	    UNION ALL
	    SELECT 'late', i.*
	      FROM settlement_items i WHERE i.client_id = $2 AND i.day = CAST($3 AS date) AND i.adjusted
	) m`

// settlementMovementsSQL lists the movements of a settled day: own, then adjustments,
// then late ones; within a part by what they add to (captures and installments, refunds,
// disputes, compensations), currency and time. $4 bounds the rows (NULL: all).
const settlementMovementsSQL = `
	SELECT m.part, m.kind, m.source_id, to_char(m.day, 'YYYY-MM-DD') AS day, m.occurred_at, m.amount, m.currency,
	       o.public_id::text AS order_public_id, o.status::text AS order_status,
	       s.id AS counted_by, to_char(s.day, 'YYYY-MM-DD') AS counted_on
	` + settlementMovementsFrom + `
	  JOIN settlements s ON s.id = m.settlement_id
	  LEFT JOIN orders o ON o.id = m.order_id
	 ORDER BY array_position(ARRAY['own', 'adjustment', 'late'], m.part),
	          array_position(ARRAY['capture', 'installment', 'refund', 'dispute', 'compensation'], m.kind::text),
	          m.currency, m.occurred_at, m.source_id
	 LIMIT $4`

// settlementMovementSumsSQL sums the movements of a settled day by part, kind and currency.
const settlementMovementSumsSQL = `
	SELECT m.part, m.kind::text AS kind, m.currency::text AS currency, count(*) AS count, sum(m.amount) AS amount
	` + settlementMovementsFrom + `
	 GROUP BY m.part, m.kind, m.currency
	 ORDER BY m.part, m.kind, m.currency`

// SettlementMovements lists the movements of settlement id (of client and day, YYYY-MM-DD),
// at most limit.
func SettlementMovements(ctx context.Context, db sqlx.QueryerContext, id, client int64, day string, limit int) ([]SettlementMovement, error) {
	var out []SettlementMovement
	if err := sqlx.SelectContext(ctx, db, &out, settlementMovementsSQL, id, client, day, limit); err != nil {
		return nil, fmt.Errorf("list the movements of settlement %d: %w", id, err)
	}
	return out, nil
}

// EachSettlementMovement calls fn with every movement of settlement id, in the order of
// SettlementMovements, reading them as they come rather than all at once: an export of a
// busy day streams.
func EachSettlementMovement(ctx context.Context, db sqlx.QueryerContext, id, client int64, day string, fn func(SettlementMovement) error) error {
	rows, err := db.QueryxContext(ctx, settlementMovementsSQL, id, client, day, nil)
	if err != nil {
		return fmt.Errorf("read the movements of settlement %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var m SettlementMovement
		if err := rows.StructScan(&m); err != nil {
			return fmt.Errorf("read the movements of settlement %d: %w", id, err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the movements of settlement %d: %w", id, err)
	}
	return nil
}

// SettlementMovementSums sums every movement of settlement id by part, kind and currency.
func SettlementMovementSums(ctx context.Context, db sqlx.QueryerContext, id, client int64, day string) ([]MovementSum, error) {
	var out []MovementSum
	if err := sqlx.SelectContext(ctx, db, &out, settlementMovementSumsSQL, id, client, day); err != nil {
		return nil, fmt.Errorf("sum the movements of settlement %d: %w", id, err)
	}
	return out, nil
}
