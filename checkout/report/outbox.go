package report

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// OutboxEvent is one event of the outbox with the state of its dispatch.
type OutboxEvent struct {
	ID         string    `db:"id"`
	ClientID   int64     `db:"client_id"`
	ClientName string    `db:"client_name"`
	Type       string    `db:"type"`
	Order      *string   `db:"order_public_id"`
	Payload    string    `db:"payload"`
	CreatedAt  time.Time `db:"created_at"`
	// The dispatch: where it stands (a Dispatch constant), its failed attempts and their
	// last error; an event dispatched after failed attempts keeps none of them (its
	// queue row is gone).
	Dispatch  string  `db:"dispatch"`
	Attempts  int     `db:"attempts"`
	LastError *string `db:"last_error"`
	// Its deliveries to the client's endpoints, counted by how each stands: the
	// dispatch only says they were made, not that any endpoint took the event.
	Deliveries EventDeliveryCounts `db:"deliveries"`
}

// EventDeliveryCounts counts an event's deliveries (one per endpoint) by how they stand.
type EventDeliveryCounts struct {
	All       int `db:"total"`
	Delivered int `db:"delivered"` // answered 2xx
	Waiting   int `db:"waiting"`   // pending, not attempted yet
	Retrying  int `db:"retrying"`  // pending, attempted and failed: another attempt is scheduled
	Dead      int `db:"dead"`      // given up on
	// NextAttemptAt is the soonest next attempt of a pending one; nil when none is pending.
	NextAttemptAt *time.Time `db:"next_attempt_at"`
}

// OutboxFilter narrows the events: to a client, a type, an order (its public id). Zero
// values do not narrow.
type OutboxFilter struct {
	ClientID int64
	Type     string
	Order    string
}

// outboxLimit bounds the events page: the newest events, narrowed further by the filter.
const outboxLimit = 200

// Where an event's dispatch stands (OutboxEvent.Dispatch): its row in outbox_queue is
// the event not yet dispatched (migration 48).
const (
	DispatchDone      = "dispatched" // no row: its handlers' work committed
	DispatchWaiting   = "waiting"    // not attempted yet
	DispatchRetrying  = "retrying"   // attempted and failed; another attempt is due at available_at
	DispatchDiscarded = "discarded"  // failed its last attempt: its consumers never saw it
)

// dispatchStateSQL is an event's Dispatch from its queue row q (LEFT JOINed).
const dispatchStateSQL = `CASE WHEN q.event_id IS NULL THEN '` + DispatchDone + `'
            WHEN q.discarded_at IS NOT NULL THEN '` + DispatchDiscarded + `'
            WHEN q.attempts > 0 THEN '` + DispatchRetrying + `'
            ELSE '` + DispatchWaiting + `' END`

// outboxSQL reads the newest events matching the filter ($1 client, $2 type, $3 order: NULL
// matches all) with their dispatch (their queue row, through its primary key) and their
// deliveries counted through the unique (event_id, endpoint_id) index.
const outboxSQL = `
SELECT e.id, e.client_id, c.name AS client_name, e.type, o.public_id AS order_public_id,
       e.payload::text AS payload, e.created_at,
       ` + dispatchStateSQL + ` AS dispatch, coalesce(q.attempts, 0) AS attempts, q.last_error,
       w.total AS "deliveries.total", w.delivered AS "deliveries.delivered", w.waiting AS "deliveries.waiting",
       w.retrying AS "deliveries.retrying", w.dead AS "deliveries.dead", w.next_attempt_at AS "deliveries.next_attempt_at"
  FROM outbox_events e
  JOIN clients c ON c.id = e.client_id
  LEFT JOIN orders o ON o.id = e.order_id
  LEFT JOIN outbox_queue q ON q.event_id = e.id
  CROSS JOIN LATERAL (
      SELECT count(*) AS total,
             count(*) FILTER (WHERE state = 'succeeded') AS delivered,
             count(*) FILTER (WHERE state = 'pending' AND attempts = 0) AS waiting,
             count(*) FILTER (WHERE state = 'pending' AND attempts > 0) AS retrying,
             count(*) FILTER (WHERE state = 'dead') AS dead,
             min(next_attempt_at) FILTER (WHERE state = 'pending') AS next_attempt_at
        FROM webhook_deliveries WHERE event_id = e.id) w
 WHERE ($1::bigint IS NULL OR e.client_id = $1)
   AND ($2::text IS NULL OR e.type = $2)
   AND ($3::text IS NULL OR e.order_id = (SELECT id FROM orders WHERE public_id = $3))
 ORDER BY e.created_at DESC, e.id
 LIMIT $4`

// Outbox returns the newest events matching f, with their dispatch state.
func Outbox(ctx context.Context, db sqlx.QueryerContext, f OutboxFilter) ([]OutboxEvent, error) {
	var client, typ, order any
	if f.ClientID != 0 {
		client = f.ClientID
	}
	if f.Type != "" {
		typ = f.Type
	}
	if f.Order != "" {
		order = f.Order
	}
	var rows []OutboxEvent
	if err := sqlx.SelectContext(ctx, db, &rows, outboxSQL, client, typ, order, outboxLimit); err != nil {
		return nil, fmt.Errorf("outbox events: %w", err)
	}
	for i := range rows {
		rows[i].CreatedAt = rows[i].CreatedAt.UTC()
	}
	return rows, nil
}
