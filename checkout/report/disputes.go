package report

// The console's queues of what the payment provider reported against tekrar's charges:
// cardholders' disputes (order_disputes, migration 00017), and the refunds tekrar owes or
// made for charges it gave up on (compensations, migration 00011; see
// checkout/compensate.go). Both lists show what still needs an operator first: the open
// disputes, oldest first, then the decided ones, newest decision first. See report.go for the
// conventions (parameters only, keyset pages).

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// DisputeRow is a dispute with its order, client and charge, for the disputes queue.
type DisputeRow struct {
	ID            int64      `db:"id"`
	DisputeID     string     `db:"dispute_id"`
	Provider      string     `db:"provider"`
	Amount        int64      `db:"amount"`
	Currency      string     `db:"currency"` // the order's
	Reason        string     `db:"reason"`
	Status        string     `db:"status"` // open, won or lost
	OpenedAt      time.Time  `db:"opened_at"`
	ClosedAt      *time.Time `db:"closed_at"`
	OrderPublicID string     `db:"order_public_id"`
	OrderStatus   string     `db:"order_status"`
	ClientID      int64      `db:"client_id"`
	ClientName    string     `db:"client_name"`
	ChargeID      *string    `db:"charge_id"` // the order's payment; nil without one
}

// Dispute statuses, and the filter that lists them all.
const (
	DisputeOpen = "open"
	DisputeWon  = "won"
	DisputeLost = "lost"
	StatusAll   = "all"
)

// DisputeFilter narrows the disputes queue. The zero filter lists the open disputes of every
// client.
type DisputeFilter struct {
	Status   string // open (when empty), won, lost or all
	ClientID int64  // 0: every client
	OrderID  int64  // 0: every order
}

const disputeColumns = `
	SELECT d.id, d.dispute_id, d.provider, d.amount, o.currency, d.reason, d.status, d.opened_at, d.closed_at,
	       o.public_id::text AS order_public_id, o.status AS order_status, o.client_id, c.name AS client_name,
	       p.provider_charge_id AS charge_id
	  FROM order_disputes d
	  JOIN orders o ON o.id = d.order_id
	  JOIN clients c ON c.id = o.client_id
	  LEFT JOIN payments p ON p.order_id = d.order_id`

// ListDisputes returns a page of the disputes queue: open disputes oldest first (the ones
// waiting longest on an answer to the provider), then decided ones, most recently decided
// first.
func ListDisputes(ctx context.Context, db sqlx.QueryerContext, f DisputeFilter, page Page) ([]DisputeRow, Page, error) {
	var open, decided []string
	switch f.Status {
	case "", DisputeOpen:
		open = []string{`d.status = 'open'`}
	case DisputeWon:
		decided = []string{`d.status = 'won'`}
	case DisputeLost:
		decided = []string{`d.status = 'lost'`}
	case StatusAll:
		open, decided = []string{`d.status = 'open'`}, []string{`d.status <> 'open'`}
	default:
		return nil, Page{}, invalidQuery("dispute status must be open, won, lost or all")
	}
	rows, next, err := listQueue(ctx, db, queueSpec{
		columns: disputeColumns,
		narrow: func(a *sqlArgs) []string {
			var preds []string
			if f.ClientID != 0 {
				preds = append(preds, `o.client_id = `+a.p(f.ClientID))
			}
			if f.OrderID != 0 {
				preds = append(preds, `d.order_id = `+a.p(f.OrderID))
			}
			return preds
		},
		waiting: open, waitAt: `d.opened_at`, settled: decided, doneAt: `d.closed_at`, id: `d.id`,
	}, page, func(r DisputeRow) queueKey {
		if r.Status == DisputeOpen {
			return queueKey{waiting: true, at: r.OpenedAt, id: r.ID}
		}
		return queueKey{at: *r.ClosedAt, id: r.ID}
	})
	if err != nil {
		return nil, Page{}, fmt.Errorf("list disputes: %w", err)
	}
	for i := range rows {
		rows[i].OpenedAt = rows[i].OpenedAt.UTC()
		rows[i].ClosedAt = utcPtr(rows[i].ClosedAt)
	}
	return rows, next, nil
}

// CountOpenDisputes counts the disputes the provider has not decided yet (the partial
// order_disputes_open_idx answers it).
func CountOpenDisputes(ctx context.Context, db sqlx.QueryerContext) (int64, error) {
	var n int64
	if err := sqlx.GetContext(ctx, db, &n, `SELECT count(*) FROM order_disputes WHERE status = 'open'`); err != nil {
		return 0, fmt.Errorf("count open disputes: %w", err)
	}
	return n, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
