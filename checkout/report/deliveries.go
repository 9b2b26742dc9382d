package report

// The console's reads of what tekrar told a client about one order: the order's events and,
// under each, its deliveries to the client's webhook endpoints, one per endpoint, as the
// deliveries recorded them. The order page shows them so that "a merchant never got
// order.paid" is answered on the order itself: which endpoint, how many attempts, what it
// answered last, and when the next attempt is.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// OrderEvent is one event about an order, with its deliveries.
type OrderEvent struct {
	ID        string    `db:"id"`
	Type      string    `db:"type"`
	Sequence  *int64    `db:"sequence"` // the order's sequence in the event's data; nil for events older than it
	CreatedAt time.Time `db:"created_at"`
	// Dispatch is where its dispatch (the fan-out to the endpoints) stands, as on
	// OutboxEvent.
	Dispatch string `db:"dispatch"`
	// Deliveries are the event's deliveries, one per endpoint it was sent to, by endpoint id;
	// none when no endpoint of the client is subscribed to its type (or it is not fanned out yet).
	Deliveries []EventDelivery
}

// EventDelivery is one delivery of an event to one endpoint: its state as the deliveries
// recorded it (pending, succeeded or dead), and its last attempt.
type EventDelivery struct {
	ID            int64      `db:"id"`
	EventID       string     `db:"event_id"`
	EndpointID    string     `db:"endpoint_public_id"`
	EndpointURL   string     `db:"url"`
	State         string     `db:"state"`
	Attempts      int        `db:"attempts"`
	NextAttemptAt *time.Time `db:"next_attempt_at"` // set while pending
	LastAttemptAt *time.Time `db:"last_attempt_at"`
	LastStatus    *int       `db:"last_status"` // the last attempt's HTTP status; nil: none, or no answer
	LastError     *string    `db:"last_error"`
	// LastResponse is the start of the last attempt's answer, as the deliveries kept it
	// (at most 1024 characters); nil when it had none.
	LastResponse *string    `db:"last_response"`
	FinishedAt   *time.Time `db:"finished_at"`
}

// orderEventsLimit bounds an order's events: an order has a handful (paid, refunds,
// installments); a plan of many installments shows its first ones.
const orderEventsLimit = 200

// orderEventsSQL reads an order's events ($1) in the order's sequence (outbox_events_order_idx),
// with where their dispatch stands (their queue rows, LEFT JOINed by primary key).
const orderEventsSQL = `
SELECT e.id, e.type, (e.payload->>'sequence')::bigint AS sequence, e.created_at,
       ` + dispatchStateSQL + ` AS dispatch
  FROM outbox_events e
  LEFT JOIN outbox_queue q ON q.event_id = e.id
 WHERE e.order_id = $1
 ORDER BY (e.payload->>'sequence')::bigint NULLS FIRST, e.created_at, e.id
 LIMIT $2`

// eventDeliveriesSQL reads the deliveries of events ($1, their ids) through the unique
// (event_id, endpoint_id) index, each with the response of its last attempt.
const eventDeliveriesSQL = `
SELECT d.id, d.event_id, w.public_id AS endpoint_public_id, w.url, d.state, d.attempts,
       d.next_attempt_at, d.last_attempt_at, d.last_status, d.last_error, a.response_excerpt AS last_response,
       d.finished_at
  FROM webhook_deliveries d
  JOIN webhook_endpoints w ON w.id = d.endpoint_id
  LEFT JOIN LATERAL (
      SELECT response_excerpt FROM webhook_attempts
       WHERE delivery_id = d.id
       ORDER BY attempted_at DESC, id DESC LIMIT 1) a ON true
 WHERE d.event_id = ANY ($1)
 ORDER BY d.event_id, w.public_id`

// OrderEvents returns the events about order orderID, in the order's sequence, each with
// its deliveries.
func OrderEvents(ctx context.Context, db sqlx.QueryerContext, orderID int64) ([]OrderEvent, error) {
	var es []OrderEvent
	if err := sqlx.SelectContext(ctx, db, &es, orderEventsSQL, orderID, orderEventsLimit); err != nil {
		return nil, fmt.Errorf("events of order %d: %w", orderID, err)
	}
	if len(es) == 0 {
		return nil, nil
	}
	ids := make(pq.StringArray, len(es))
	at := make(map[string]int, len(es))
	for i := range es {
		es[i].CreatedAt = es[i].CreatedAt.UTC()
		ids[i], at[es[i].ID] = es[i].ID, i
	}
	var ds []EventDelivery
	if err := sqlx.SelectContext(ctx, db, &ds, eventDeliveriesSQL, ids); err != nil {
		return nil, fmt.Errorf("deliveries of order %d: %w", orderID, err)
	}
	for _, d := range ds {
		i := at[d.EventID]
		es[i].Deliveries = append(es[i].Deliveries, d)
	}
	return es, nil
}

// Counts counts e's deliveries by how they stand, as Outbox counts an event's.
func (e OrderEvent) Counts() EventDeliveryCounts {
	var c EventDeliveryCounts
	for _, d := range e.Deliveries {
		c.All++
		switch {
		case d.State == "succeeded":
			c.Delivered++
		case d.State == "dead":
			c.Dead++
		case d.Attempts == 0:
			c.Waiting++
		default:
			c.Retrying++
		}
		if d.State == "pending" && d.NextAttemptAt != nil && (c.NextAttemptAt == nil || d.NextAttemptAt.Before(*c.NextAttemptAt)) {
			c.NextAttemptAt = d.NextAttemptAt
		}
	}
	return c
}

// EndpointDelivery is one delivery of an event to a webhook endpoint, as the endpoint's
// page lists it.
type EndpointDelivery struct {
	ID            int64      `db:"id"` // internal: the page cursor's tie-break, never shown
	EventID       string     `db:"event_id"`
	EventType     string     `db:"event_type"`
	State         string     `db:"state"` // pending, succeeded or dead
	Attempts      int        `db:"attempts"`
	CreatedAt     time.Time  `db:"created_at"`
	NextAttemptAt *time.Time `db:"next_attempt_at"` // set while pending
	LastAttemptAt *time.Time `db:"last_attempt_at"`
	LastStatus    *int       `db:"last_status"` // the last attempt's HTTP status; nil: none, or no answer
	LastError     *string    `db:"last_error"`
	FinishedAt    *time.Time `db:"finished_at"`
	// OrderPublicID is the order the event is about; nil for an event about none.
	OrderPublicID *string `db:"order_public_id"`
}

// ErrEndpointNotFound is an endpoint id that names no endpoint.
var ErrEndpointNotFound = errors.New("no such webhook endpoint")

// endpointDeliveriesSQL reads a page of an endpoint's deliveries ($1, its public id), newest
// first, through webhook_deliveries_endpoint_idx (endpoint_id, created_at DESC); %s is the
// cursor's predicate, LIMIT the page's rows and one more.
const endpointDeliveriesSQL = `
SELECT d.id, d.event_id, d.event_type, d.state, d.attempts, d.created_at, d.next_attempt_at, d.last_attempt_at,
       d.last_status, d.last_error, d.finished_at, o.public_id::text AS order_public_id
  FROM webhook_deliveries d
  LEFT JOIN outbox_events ev ON ev.id = d.event_id
  LEFT JOIN orders o ON o.id = ev.order_id
 WHERE d.endpoint_id = (SELECT id FROM webhook_endpoints WHERE public_id = $1)%s
 ORDER BY d.created_at DESC, d.id DESC
 LIMIT $2`

// EndpointDeliveries returns a page of the deliveries to the endpoint whose public id is
// endpoint (we_…), newest first; ErrEndpointNotFound when none has that id.
func EndpointDeliveries(ctx context.Context, db sqlx.QueryerContext, endpoint string, page Page) ([]EndpointDelivery, Page, error) {
	cur, err := page.decode()
	if err != nil {
		return nil, Page{}, err
	}
	n := page.size()
	a := sqlArgs{endpoint, n + 1}
	after := ""
	if cur != nil {
		after = " AND (d.created_at, d.id) < (" + a.p(cur.at) + "::timestamptz, " + a.p(cur.id) + "::bigint)"
	}
	var rows []EndpointDelivery
	if err := sqlx.SelectContext(ctx, db, &rows, fmt.Sprintf(endpointDeliveriesSQL, after), a...); err != nil {
		return nil, Page{}, fmt.Errorf("deliveries of endpoint %s: %w", endpoint, err)
	}
	if cur == nil && len(rows) == 0 {
		var found bool
		if err := sqlx.GetContext(ctx, db, &found, `SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE public_id = $1)`, endpoint); err != nil {
			return nil, Page{}, fmt.Errorf("endpoint %s: %w", endpoint, err)
		}
		if !found {
			return nil, Page{}, ErrEndpointNotFound
		}
	}
	nx := nextPage(n, len(rows), func() pageCursor { return pageCursor{at: rows[n-1].CreatedAt, id: rows[n-1].ID} })
	if len(rows) > n {
		rows = rows[:n]
	}
	for i := range rows {
		rows[i].CreatedAt = rows[i].CreatedAt.UTC()
	}
	return rows, nx, nil
}
