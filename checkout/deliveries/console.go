package deliveries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// The console's reads of client webhooks: endpoints of every client with their deliveries'
// states, one endpoint's deliveries with every attempt, and the dead deliveries.

// EndpointSummary is an endpoint as the console lists it.
type EndpointSummary struct {
	InternalID     int64          `db:"id"`
	ID             string         `db:"public_id"`
	ClientID       int64          `db:"client_id"`
	ClientName     string         `db:"client_name"`
	ClientContact  string         `db:"client_contact"` // the client's contact e-mail; empty: none
	URL            string         `db:"url"`
	EventTypes     pq.StringArray `db:"event_types"`
	CreatedAt      time.Time      `db:"created_at"`
	DisabledAt     *time.Time     `db:"disabled_at"`
	DisabledReason *string        `db:"disabled_reason"`
	DeletedAt      *time.Time     `db:"deleted_at"`
	Pending        int            `db:"pending"`
	Succeeded      int            `db:"succeeded"`
	Dead           int            `db:"dead"`
}

// DeliveryLine is one delivery, with its attempts when asked for.
type DeliveryLine struct {
	ID            int64      `db:"id"`
	EventID       string     `db:"event_id"`
	EventType     string     `db:"event_type"`
	EndpointID    string     `db:"endpoint_public_id"`
	EndpointURL   string     `db:"url"`
	ClientName    string     `db:"client_name"`
	State         string     `db:"state"`
	Attempts      int        `db:"attempts"`
	CreatedAt     time.Time  `db:"created_at"`
	NextAttemptAt *time.Time `db:"next_attempt_at"`
	LastStatus    *int       `db:"last_status"`
	LastError     *string    `db:"last_error"`
	FinishedAt    *time.Time `db:"finished_at"`
	// Order is the public id of the order the event is about; nil for an event about none.
	Order *string `db:"order_public_id"`
	Tries []AttemptLine
}

// AttemptLine is one attempt of a delivery.
type AttemptLine struct {
	DeliveryID int64     `db:"delivery_id"`
	At         time.Time `db:"attempted_at"`
	Manual     bool      `db:"manual"`
	Status     *int      `db:"status_code"`
	LatencyMS  int       `db:"latency_ms"`
	Error      *string   `db:"error"`
	Response   *string   `db:"response_excerpt"`
}

const (
	consoleEndpointColumns = `
	SELECT e.id, e.public_id, e.client_id, c.name AS client_name, coalesce(c.contact_email, '') AS client_contact,
	       e.url, e.event_types, e.created_at,
	       e.disabled_at, e.disabled_reason, e.deleted_at,
	       count(d.id) FILTER (WHERE d.state = 'pending') AS pending,
	       count(d.id) FILTER (WHERE d.state = 'succeeded') AS succeeded,
	       count(d.id) FILTER (WHERE d.state = 'dead') AS dead
	  FROM webhook_endpoints e
	  JOIN clients c ON c.id = e.client_id
	  LEFT JOIN webhook_deliveries d ON d.endpoint_id = e.id`

	consoleEndpointsSQL = consoleEndpointColumns + `
	 GROUP BY e.id, c.id
	 ORDER BY (e.disabled_at IS NOT NULL AND e.deleted_at IS NULL) DESC, e.deleted_at IS NOT NULL, e.created_at DESC
	 LIMIT 500`

	consoleEndpointSQL = consoleEndpointColumns + `
	 WHERE e.public_id = $1
	 GROUP BY e.id, c.id`

	deliveryLineColumns = `
	SELECT d.id, d.event_id, d.event_type, e.public_id AS endpoint_public_id, e.url, c.name AS client_name,
	       d.state, d.attempts, d.created_at, d.next_attempt_at, d.last_status, d.last_error, d.finished_at,
	       o.public_id AS order_public_id
	  FROM webhook_deliveries d
	  JOIN webhook_endpoints e ON e.id = d.endpoint_id
	  JOIN clients c ON c.id = e.client_id
	  LEFT JOIN outbox_events ev ON ev.id = d.event_id
	  LEFT JOIN orders o ON o.id = ev.order_id`

	endpointDeliveriesSQL = deliveryLineColumns + `
	 WHERE d.endpoint_id = $1
	 ORDER BY d.created_at DESC, d.id DESC
	 LIMIT 100`

	deadDeliveriesSQL = deliveryLineColumns + `
	 WHERE d.state = 'dead'
	 ORDER BY d.finished_at DESC, d.id DESC
	 LIMIT 100`

	deliverySQL = deliveryLineColumns + `
	 WHERE d.id = $1`

	attemptsOfSQL = `
	SELECT delivery_id, attempted_at, manual, status_code, latency_ms, error, response_excerpt
	  FROM webhook_attempts
	 WHERE delivery_id = ANY ($1)
	 ORDER BY attempted_at, id`
)

// ConsoleEndpoints lists every client's endpoints: disabled ones first (they need their
// owner), then enabled, then deleted.
func ConsoleEndpoints(ctx context.Context, db *sqlx.DB) ([]EndpointSummary, error) {
	var es []EndpointSummary
	if err := db.SelectContext(ctx, &es, consoleEndpointsSQL); err != nil {
		return nil, fmt.Errorf("console endpoints: %w", err)
	}
	return es, nil
}

// ConsoleEndpoint returns one endpoint and its latest deliveries with their attempts.
func ConsoleEndpoint(ctx context.Context, db *sqlx.DB, publicID string) (EndpointSummary, []DeliveryLine, error) {
	var e EndpointSummary
	if !ValidEndpointID(publicID) {
		return e, nil, ErrEndpointNotFound
	}
	err := db.GetContext(ctx, &e, consoleEndpointSQL, publicID)
	if errors.Is(err, sql.ErrNoRows) {
		return e, nil, ErrEndpointNotFound
	}
	if err != nil {
		return e, nil, fmt.Errorf("console endpoint: %w", err)
	}
	var ds []DeliveryLine
	if err := db.SelectContext(ctx, &ds, endpointDeliveriesSQL, e.InternalID); err != nil {
		return e, nil, fmt.Errorf("console deliveries: %w", err)
	}
	return e, ds, withAttempts(ctx, db, ds)
}

// DeadDeliveries lists the latest dead deliveries of every endpoint.
func DeadDeliveries(ctx context.Context, db *sqlx.DB) ([]DeliveryLine, error) {
	var ds []DeliveryLine
	if err := db.SelectContext(ctx, &ds, deadDeliveriesSQL); err != nil {
		return nil, fmt.Errorf("dead deliveries: %w", err)
	}
	return ds, nil
}

// GetDelivery returns one delivery with its attempts: ErrDeliveryNotFound if none.
func GetDelivery(ctx context.Context, db *sqlx.DB, id int64) (DeliveryLine, error) {
	var d DeliveryLine
	err := db.GetContext(ctx, &d, deliverySQL, id)
	if errors.Is(err, sql.ErrNoRows) {
		return d, ErrDeliveryNotFound
	}
	if err != nil {
		return d, fmt.Errorf("delivery %d: %w", id, err)
	}
	ds := []DeliveryLine{d}
	err = withAttempts(ctx, db, ds)
	return ds[0], err
}

func withAttempts(ctx context.Context, db *sqlx.DB, ds []DeliveryLine) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make(pq.Int64Array, len(ds))
	at := make(map[int64]int, len(ds))
	for i, d := range ds {
		ids[i], at[d.ID] = d.ID, i
	}
	var as []AttemptLine
	if err := db.SelectContext(ctx, &as, attemptsOfSQL, ids); err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	for _, a := range as {
		i := at[a.DeliveryID]
		ds[i].Tries = append(ds[i].Tries, a)
	}
	return nil
}
