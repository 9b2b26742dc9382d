package report

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// OutboxEvent is one event of the outbox with the state of its dispatch job.
type OutboxEvent struct {
	ID         string    `db:"id"`
	ClientID   int64     `db:"client_id"`
	ClientName string    `db:"client_name"`
	Type       string    `db:"type"`
	Order      *string   `db:"order_public_id"`
	Payload    string    `db:"payload"`
	CreatedAt  time.Time `db:"created_at"`
	// The dispatch job: its River state (available, running, retryable, completed, ...),
	// attempts and last error. JobState is nil once River deleted the finished job (after
	// its retention period).
	JobState  *string `db:"job_state"`
	Attempts  int     `db:"attempts"`
	LastError *string `db:"last_error"`
	// Its deliveries to the client's endpoints, counted by how each stands: the dispatch
	// job's completion only says they were made, not that any endpoint took the event.
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

// outboxSQL reads the newest events matching the filter ($1 client, $2 type, $3 order: NULL
// matches all) with their dispatch jobs, found by River's index on the jobs' args, and
// their deliveries counted through the unique (event_id, endpoint_id) index. The jobs'
// subquery ends in OFFSET 0 so that it is planned alone, through that GIN index: with the
// newest job's ORDER BY id DESC LIMIT 1 in view, the planner walked river_job's primary
// key backwards instead, reading every job newer than the event's (all of them, for an
// old event) once per event listed (TestConsolePlans' thrown-away rows).
const outboxSQL = `
SELECT e.id, e.client_id, c.name AS client_name, e.type, o.public_id AS order_public_id,
       e.payload::text AS payload, e.created_at,
       j.state::text AS job_state, coalesce(j.attempt, 0) AS attempts,
       j.errors[array_length(j.errors, 1)]->>'error' AS last_error,
       w.total AS "deliveries.total", w.delivered AS "deliveries.delivered", w.waiting AS "deliveries.waiting",
       w.retrying AS "deliveries.retrying", w.dead AS "deliveries.dead", w.next_attempt_at AS "deliveries.next_attempt_at"
  FROM outbox_events e
  JOIN clients c ON c.id = e.client_id
  LEFT JOIN orders o ON o.id = e.order_id
  LEFT JOIN LATERAL (
      SELECT state, attempt, errors FROM (
          SELECT id, state, attempt, errors FROM river_job
           WHERE kind = 'outbox_dispatch' AND args @> jsonb_build_object('event_id', e.id)
          OFFSET 0) jobs
       ORDER BY id DESC LIMIT 1) j ON true
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
