package report

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// ReconcileRun is a run of reconciliation (checkout/reconcile). A run killed half way
// has no FinishedAt.
type ReconcileRun struct {
	ID                   int64      `db:"id"`
	Process              string     `db:"process"`
	Scheduled            bool       `db:"scheduled"`
	WindowStart          time.Time  `db:"window_start"`
	WindowEnd            time.Time  `db:"window_end"`
	StartedAt            time.Time  `db:"started_at"`
	FinishedAt           *time.Time `db:"finished_at"`
	ChargesSeen          int        `db:"charges_seen"`
	Orphans              int        `db:"orphans"`
	CompensationsCreated int        `db:"compensations_created"`
	RefundsMade          int        `db:"refunds_made"`
	Mismatches           int        `db:"mismatches"`
	PaidWithoutCharge    int        `db:"paid_without_charge"`
	Error                *string    `db:"error"`
}

// ReconcileFinding is a disagreement reconciliation found, with the compensation of an
// orphan charge. An orphan charge may have no order: OrderPublicID is then nil, and so is
// every compensation field of a finding that owes nothing.
type ReconcileFinding struct {
	ID               int64     `db:"id"`
	Kind             string    `db:"kind"` // orphan_charge, amount_mismatch or paid_without_charge
	ChargeID         string    `db:"charge_id"`
	OrderPublicID    *string   `db:"order_public_id"`
	ProviderAmount   *int64    `db:"provider_amount"`
	ProviderCurrency *string   `db:"provider_currency"`
	OrderAmount      *int64    `db:"order_amount"`
	OrderCurrency    *string   `db:"order_currency"`
	Detail           string    `db:"detail"`
	FoundAt          time.Time `db:"found_at"`
	LastSeenAt       time.Time `db:"last_seen_at"`
	// The orphan charge's compensation: watching, refunded or no_charge.
	CompensationState *string `db:"compensation_state"`
	RefundID          *string `db:"refund_id"`
	LastError         *string `db:"last_error"`
}

// reconciliationLimit bounds each list of the page: the newest runs and findings.
const reconciliationLimit = 200

// Reconciliation returns the newest runs and findings, newest first, each through its
// (found or started, id) index. A finding reads its order and its compensation by their
// keys; either may be missing.
func Reconciliation(ctx context.Context, db sqlx.QueryerContext) ([]ReconcileRun, []ReconcileFinding, error) {
	var runs []ReconcileRun
	if err := sqlx.SelectContext(ctx, db, &runs, `
		SELECT id, process, scheduled, window_start, window_end, started_at, finished_at, charges_seen, orphans,
		       compensations_created, refunds_made, mismatches, paid_without_charge, error
		  FROM reconciliation_runs ORDER BY started_at DESC, id DESC LIMIT $1`, reconciliationLimit); err != nil {
		return nil, nil, fmt.Errorf("reconciliation runs: %w", err)
	}
	var findings []ReconcileFinding
	if err := sqlx.SelectContext(ctx, db, &findings, `
		SELECT f.id, f.kind, f.charge_id, o.public_id AS order_public_id, f.provider_amount, f.provider_currency,
		       f.order_amount, f.order_currency, f.detail, f.found_at, f.last_seen_at,
		       c.state AS compensation_state, c.refund_id, c.last_error
		  FROM reconciliation_findings f
		  LEFT JOIN orders o ON o.id = f.order_id
		  LEFT JOIN compensations c ON f.kind = 'orphan_charge' AND c.charge_key = f.charge_key
		 ORDER BY f.found_at DESC, f.id DESC LIMIT $1`, reconciliationLimit); err != nil {
		return nil, nil, fmt.Errorf("reconciliation findings: %w", err)
	}
	for i := range runs {
		r := &runs[i]
		r.WindowStart, r.WindowEnd, r.StartedAt = r.WindowStart.UTC(), r.WindowEnd.UTC(), r.StartedAt.UTC()
		if r.FinishedAt != nil {
			t := r.FinishedAt.UTC()
			r.FinishedAt = &t
		}
	}
	for i := range findings {
		findings[i].FoundAt, findings[i].LastSeenAt = findings[i].FoundAt.UTC(), findings[i].LastSeenAt.UTC()
	}
	return runs, findings, nil
}
