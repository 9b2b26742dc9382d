package report

// The console's list of compensations: the refunds tekrar owes, or made, for charges it gave
// up on (checkout/compensate.go, docs/recovery.md). A compensation normally belongs to an
// order, the one canceled without a fence; one found by reconciliation for a charge that
// names no order of tekrar's (an orphan charge) has none, so every read of the order is a
// LEFT JOIN and its columns may be NULL.

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
)

// CompensationRow is a compensation, with its order and client when it has them.
type CompensationRow struct {
	ID            int64      `db:"id"`
	State         string     `db:"state"` // watching, refunded or no_charge
	Reason        string     `db:"reason"`
	ChargeKey     string     `db:"charge_key"`
	ChargeID      *string    `db:"charge_id"`
	RefundID      *string    `db:"refund_id"`
	Amount        *int64     `db:"amount"`
	Currency      *string    `db:"currency"`
	Attempts      int        `db:"attempts"`
	LastError     *string    `db:"last_error"`
	NextAttemptAt time.Time  `db:"next_attempt_at"`
	WatchUntil    time.Time  `db:"watch_until"`
	CreatedAt     time.Time  `db:"created_at"`
	SettledAt     *time.Time `db:"settled_at"`
	// The order the compensation is for; nil for an orphan charge.
	OrderPublicID *string `db:"order_public_id"`
	ClientID      *int64  `db:"client_id"`
	ClientName    *string `db:"client_name"`
}

// CompensationFilter narrows the compensations list. The zero filter lists every
// compensation of every client.
type CompensationFilter struct {
	State    string // watching, refunded, no_charge, already_refunded or all (when empty)
	ClientID int64  // 0: every client
	OrderID  int64  // 0: every order
}

const compensationColumns = `
	SELECT m.id, m.state, m.reason, coalesce(m.charge_key::text, '') AS charge_key, m.charge_id, m.refund_id,
	       m.amount, m.currency::text AS currency, m.attempts, m.last_error, m.next_attempt_at, m.watch_until,
	       m.created_at, m.settled_at, o.public_id::text AS order_public_id, m.client_id, c.name AS client_name
	  FROM compensations m
	  LEFT JOIN orders o ON o.id = m.order_id
	  LEFT JOIN clients c ON c.id = m.client_id`

// ListCompensations returns a page of compensations: those not settled yet (watching for a
// charge, or held while the charge's dispute is open), oldest first, then the settled ones,
// most recently settled first.
func ListCompensations(ctx context.Context, db sqlx.QueryerContext, f CompensationFilter, page Page) ([]CompensationRow, Page, error) {
	var watching, settled []string
	switch f.State {
	case "", StatusAll:
		watching, settled = []string{`m.state IN ('watching', 'disputed')`}, []string{`m.state NOT IN ('watching', 'disputed')`}
	case checkout.CompensationWatching:
		watching = []string{`m.state = 'watching'`}
	case checkout.CompensationDisputed:
		watching = []string{`m.state = 'disputed'`}
	case checkout.CompensationDisputeLost:
		settled = []string{`m.state = 'dispute_lost'`}
	case checkout.CompensationRefunded:
		settled = []string{`m.state = 'refunded'`}
	case checkout.CompensationNoCharge:
		settled = []string{`m.state = 'no_charge'`}
	case checkout.CompensationAlreadyRefunded:
		settled = []string{`m.state = 'already_refunded'`}
	default:
		return nil, Page{}, invalidQuery("compensation state must be watching, disputed, refunded, no_charge, already_refunded, dispute_lost or all")
	}
	rows, next, err := listQueue(ctx, db, queueSpec{
		columns: compensationColumns,
		narrow: func(a *sqlArgs) []string {
			var preds []string
			if f.ClientID != 0 {
				preds = append(preds, `m.client_id = `+a.p(f.ClientID))
			}
			if f.OrderID != 0 {
				preds = append(preds, `m.order_id = `+a.p(f.OrderID))
			}
			return preds
		},
		waiting: watching, waitAt: `m.created_at`, settled: settled, doneAt: `m.settled_at`, id: `m.id`,
	}, page, func(r CompensationRow) queueKey {
		if r.SettledAt == nil { // watching, or held while disputed
			return queueKey{waiting: true, at: r.CreatedAt, id: r.ID}
		}
		return queueKey{at: *r.SettledAt, id: r.ID}
	})
	if err != nil {
		return nil, Page{}, fmt.Errorf("list compensations: %w", err)
	}
	for i := range rows {
		r := &rows[i]
		r.NextAttemptAt, r.WatchUntil, r.CreatedAt = r.NextAttemptAt.UTC(), r.WatchUntil.UTC(), r.CreatedAt.UTC()
		r.SettledAt = utcPtr(r.SettledAt)
	}
	return rows, next, nil
}

// CompensationCounts counts the compensations by state.
type CompensationCounts struct {
	Watching int64 `db:"watching"`
	Refunded int64 `db:"refunded"`
	NoCharge int64 `db:"no_charge"`
	// AlreadyRefunded: a charge appeared that the provider had already refunded in full.
	AlreadyRefunded int64 `db:"already_refunded"`
	// Disputed: held while the charge's dispute is open; DisputeLost: settled with nothing to
	// refund once the cardholder won the dispute.
	Disputed    int64 `db:"disputed"`
	DisputeLost int64 `db:"dispute_lost"`
}

// CountCompensations counts the compensations by state. The table holds one row per charge
// given up on, a rare event: the count reads it whole.
func CountCompensations(ctx context.Context, db sqlx.QueryerContext) (CompensationCounts, error) {
	var c CompensationCounts
	if err := sqlx.GetContext(ctx, db, &c, `
		SELECT count(*) FILTER (WHERE state = 'watching') AS watching,
		       count(*) FILTER (WHERE state = 'refunded') AS refunded,
		       count(*) FILTER (WHERE state = 'no_charge') AS no_charge,
		       count(*) FILTER (WHERE state = 'already_refunded') AS already_refunded,
		       count(*) FILTER (WHERE state = 'disputed') AS disputed,
		       count(*) FILTER (WHERE state = 'dispute_lost') AS dispute_lost
		  FROM compensations`); err != nil {
		return CompensationCounts{}, fmt.Errorf("count compensations: %w", err)
	}
	return c, nil
}
