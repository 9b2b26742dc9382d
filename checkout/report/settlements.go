package report

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// The console's view of nightly settlement (checkout/settle.go, migration 00029): the
// settlements, newest day first, one row per settlement and currency, and the adjustments,
// the movements of a settled day that a later settlement counted.

// SettlementFilter narrows the settlements and their adjustments. Days are YYYY-MM-DD,
// checked by the caller; "" leaves that end open.
type SettlementFilter struct {
	ClientID int64
	From, To string // the settlement's day, both ends included
}

// SettlementRow is a settlement with its figures of one currency; a settlement of a day
// with no movement comes once, with no currency and zero figures.
type SettlementRow struct {
	ID                int64     `db:"id"`
	ClientID          int64     `db:"client_id"`
	ClientName        string    `db:"client_name"`
	Day               string    `db:"day"` // YYYY-MM-DD
	TimeZone          string    `db:"time_zone"`
	StartsAt          time.Time `db:"starts_at"`
	EndsAt            time.Time `db:"ends_at"`
	SettledAt         time.Time `db:"settled_at"`
	Process           string    `db:"process"`
	Currency          *string   `db:"currency"`
	CapturedAmount    int64     `db:"captured_amount"`
	CapturedCount     int       `db:"captured_count"`
	RefundedAmount    int64     `db:"refunded_amount"`
	RefundedCount     int       `db:"refunded_count"`
	DisputedAmount    int64     `db:"disputed_amount"`
	DisputedCount     int       `db:"disputed_count"`
	CompensatedAmount int64     `db:"compensated_amount"`
	CompensatedCount  int       `db:"compensated_count"`
	Adjustments       int       `db:"adjustments"` // movements of earlier days it counted
}

// AdjustmentRow is a movement of a settled day that came after the day was settled, and
// the settlement that counted it.
type AdjustmentRow struct {
	SettlementID  int64     `db:"settlement_id"`
	SettledDay    string    `db:"settled_day"` // the settlement that counted it
	ClientID      int64     `db:"client_id"`
	ClientName    string    `db:"client_name"`
	Day           string    `db:"day"` // the day it belongs to
	Kind          string    `db:"kind"`
	SourceID      int64     `db:"source_id"`
	OccurredAt    time.Time `db:"occurred_at"`
	Amount        int64     `db:"amount"`
	Currency      string    `db:"currency"`
	OrderPublicID *string   `db:"order_public_id"`
}

// SettlementLimit bounds each list on the page, which shows the newest rows; the CSV
// exports read every row (EachSettlement, EachAdjustment).
const SettlementLimit = 200

func settlementWhere(f SettlementFilter, a *sqlArgs) string {
	w := "TRUE"
	if f.ClientID != 0 {
		w += " AND s.client_id = " + a.p(f.ClientID)
	}
	if f.From != "" {
		w += " AND s.day >= CAST(" + a.p(f.From) + " AS date)"
	}
	if f.To != "" {
		w += " AND s.day <= CAST(" + a.p(f.To) + " AS date)"
	}
	return w
}

// Settlements lists the settlements f selects, newest day first, at most limit rows.
func Settlements(ctx context.Context, db sqlx.QueryerContext, f SettlementFilter, limit int) ([]SettlementRow, error) {
	q, a := settlementsSQL(f, limit)
	var rows []SettlementRow
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, fmt.Errorf("list settlements: %w", err)
	}
	return rows, nil
}

// EachSettlement calls fn with every settlement row f selects, in the order of
// Settlements, reading them as they come rather than all at once: an export streams.
func EachSettlement(ctx context.Context, db sqlx.QueryerContext, f SettlementFilter, fn func(SettlementRow) error) error {
	q, a := settlementsSQL(f, 0)
	return eachRow(ctx, db, "list settlements", q, a, fn)
}

// Adjustments lists the adjustments counted by the settlements f selects, newest
// settlement first, at most limit rows.
func Adjustments(ctx context.Context, db sqlx.QueryerContext, f SettlementFilter, limit int) ([]AdjustmentRow, error) {
	q, a := adjustmentsSQL(f, limit)
	var rows []AdjustmentRow
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, fmt.Errorf("list adjustments: %w", err)
	}
	return rows, nil
}

// EachAdjustment calls fn with every adjustment the settlements f selects counted, in the
// order of Adjustments, reading them as they come.
func EachAdjustment(ctx context.Context, db sqlx.QueryerContext, f SettlementFilter, fn func(AdjustmentRow) error) error {
	q, a := adjustmentsSQL(f, 0)
	return eachRow(ctx, db, "list adjustments", q, a, fn)
}

// eachRow runs q and calls fn with each row as it is read; what names the read in errors.
func eachRow[R any](ctx context.Context, db sqlx.QueryerContext, what, q string, a []any, fn func(R) error) error {
	rows, err := db.QueryxContext(ctx, q, a...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r R
		if err := rows.StructScan(&r); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// settlementsSQL is the settlements f selects, at most limit rows (0: every one).
func settlementsSQL(f SettlementFilter, limit int) (string, []any) {
	var a sqlArgs
	where := settlementWhere(f, &a)
	q := `
		SELECT s.id, s.client_id, c.name AS client_name, to_char(s.day, 'YYYY-MM-DD') AS day, s.time_zone,
		       s.starts_at, s.ends_at, s.settled_at, s.process, t.currency,
		       coalesce(t.captured_amount, 0) AS captured_amount, coalesce(t.captured_count, 0) AS captured_count,
		       coalesce(t.refunded_amount, 0) AS refunded_amount, coalesce(t.refunded_count, 0) AS refunded_count,
		       coalesce(t.disputed_amount, 0) AS disputed_amount, coalesce(t.disputed_count, 0) AS disputed_count,
		       coalesce(t.compensated_amount, 0) AS compensated_amount,
		       coalesce(t.compensated_count, 0) AS compensated_count,
		       (SELECT count(*) FROM settlement_items i WHERE i.settlement_id = s.id AND i.adjusted) AS adjustments
		  FROM settlements s
		  JOIN clients c ON c.id = s.client_id
		  LEFT JOIN settlement_totals t ON t.settlement_id = s.id
		 WHERE ` + where + `
		 ORDER BY s.day DESC, s.client_id, t.currency` + sqlLimit(&a, limit)
	return q, a
}

// adjustmentsSQL is the adjustments the settlements f selects counted, at most limit rows
// (0: every one).
func adjustmentsSQL(f SettlementFilter, limit int) (string, []any) {
	var a sqlArgs
	where := settlementWhere(f, &a)
	q := `
		SELECT s.id AS settlement_id, to_char(s.day, 'YYYY-MM-DD') AS settled_day, s.client_id, c.name AS client_name,
		       to_char(i.day, 'YYYY-MM-DD') AS day, i.kind, i.source_id, i.occurred_at, i.amount, i.currency,
		       o.public_id::text AS order_public_id
		  FROM settlements s
		  JOIN clients c ON c.id = s.client_id
		  JOIN settlement_items i ON i.settlement_id = s.id AND i.adjusted
		  LEFT JOIN orders o ON o.id = i.order_id
		 WHERE ` + where + `
		 ORDER BY s.day DESC, s.client_id, i.day, i.occurred_at, i.kind, i.source_id` + sqlLimit(&a, limit)
	return q, a
}

func sqlLimit(a *sqlArgs, limit int) string {
	if limit <= 0 {
		return ""
	}
	return " LIMIT " + a.p(limit)
}
