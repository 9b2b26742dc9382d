package deliveries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// MaxResendAge is how far back a resend may reach: a window starts at most this long before
// now. Events are kept longer; a month is what an endpoint nobody noticed needs.
const MaxResendAge = 30 * 24 * time.Hour

// Window is a resend's span of event times, [Since, Until).
type Window struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// Validate refuses a window that is empty, reversed, or reaches back further than
// MaxResendAge from now, naming the field.
func (w Window) Validate(now time.Time) error {
	var errs InvalidError
	if w.Since.IsZero() {
		errs = append(errs, FieldError{Field: "since", Message: "is required: an RFC 3339 time"})
	}
	if w.Until.IsZero() {
		errs = append(errs, FieldError{Field: "until", Message: "is required: an RFC 3339 time"})
	}
	if len(errs) > 0 {
		return errs
	}
	if !w.Since.Before(w.Until) {
		errs = append(errs, FieldError{Field: "until", Message: "must be after since"})
	}
	if w.Since.Before(now.Add(-MaxResendAge)) {
		errs = append(errs, FieldError{Field: "since", Message: "must be within the last 30 days"})
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// ResendResult is what a resend did.
type ResendResult struct {
	Endpoint string `json:"endpoint"`
	Window
	// Events is how many events of the window the endpoint is subscribed to.
	Events int `json:"events"`
	// Queued is how many of them this resend queued: those the endpoint never got a
	// delivery of, and those whose delivery was dead. A delivery pending or succeeded is not
	// queued again, so a resend asked twice queues each event once.
	Queued int `json:"queued"`
	// Reenabled: the endpoint was disabled, and the resend enabled it.
	Reenabled bool `json:"reenabled"`
}

// ErrNoJobs: the store has no job client to queue a resend with.
var ErrNoJobs = errors.New("webhook resend: no job client")

// Resend sends the client's endpoint every event of the window it should have received and
// did not: each under its original webhook-id (the event's id, as every delivery of it),
// once. It enables a disabled endpoint first: asking for what it missed says it works
// again. Everything happens in one transaction, under the endpoint's row lock, so that two
// resends at once queue each event once.
func (s *Store) Resend(ctx context.Context, clientID int64, id string, w Window) (ResendResult, error) {
	var res ResendResult
	err := s.inTx(ctx, "resend webhook window", func(tx *sqlx.Tx) (err error) {
		res, err = s.ResendTx(ctx, tx, clientID, id, w)
		return err
	})
	return res, err
}

// ResendTx is Resend in tx: the console's, which writes its audit record in the same
// transaction.
func (s *Store) ResendTx(ctx context.Context, tx *sqlx.Tx, clientID int64, id string, w Window) (ResendResult, error) {
	res := ResendResult{Endpoint: id, Window: Window{Since: w.Since.UTC(), Until: w.Until.UTC()}}
	if err := w.Validate(s.now()); err != nil {
		return res, err
	}
	if !ValidEndpointID(id) {
		return res, ErrEndpointNotFound
	}
	if s.Jobs == nil {
		return res, ErrNoJobs
	}
	var endpoint int64
	err := tx.GetContext(ctx, &endpoint, lockEndpointSQL, clientID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return res, ErrEndpointNotFound
	}
	if err != nil {
		return res, fmt.Errorf("resend: lock endpoint: %w", err)
	}
	now := s.now()
	enabled, err := tx.ExecContext(ctx, enableEndpointSQL, endpoint)
	if err != nil {
		return res, fmt.Errorf("resend: enable endpoint: %w", err)
	}
	n, _ := enabled.RowsAffected()
	res.Reenabled = n > 0
	missing, err := windowEvents(ctx, tx, endpoint, w, &res.Events)
	if err != nil {
		return res, err
	}
	var queue []int64
	for _, ev := range missing {
		body, err := ev.Body() // the same body as the fan-out's
		if err != nil {
			return res, err
		}
		var d int64
		err = tx.GetContext(ctx, &d, insertResentSQL, ev.ID, ev.Type, endpoint, string(body), ev.CreatedAt, now)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("resend %s: %w", ev.ID, err)
		}
		queue = append(queue, d)
	}
	var revived []int64
	if err := tx.SelectContext(ctx, &revived, reviveDeadSQL, endpoint, w.Since, w.Until, now); err != nil {
		return res, fmt.Errorf("resend: dead deliveries: %w", err)
	}
	queue = append(queue, revived...)
	// Each job is a scheduled one (the delivery's own schedule, from now), told apart
	// from the delivery's first job by the resend's time, which River's unique args
	// would otherwise take for a duplicate.
	nonce := "resend " + now.UTC().Format(time.RFC3339Nano)
	for _, d := range queue {
		if _, err := s.Jobs.InsertTx(ctx, tx.Tx, DeliverArgs{DeliveryID: d, Nonce: nonce}, nil); err != nil {
			return res, fmt.Errorf("queue resend of delivery %d: %w", d, err)
		}
	}
	res.Queued = len(queue)
	return res, nil
}

// windowEvents returns the events of the window the endpoint has no delivery of, and counts
// in all every event of the window it is subscribed to.
func windowEvents(ctx context.Context, tx *sqlx.Tx, endpoint int64, w Window, all *int) ([]outbox.Event, error) {
	rows, err := tx.QueryContext(ctx, windowEventsSQL, endpoint, w.Since, w.Until)
	if err != nil {
		return nil, fmt.Errorf("resend: events of the window: %w", err)
	}
	defer rows.Close()
	var missing []outbox.Event
	for rows.Next() {
		var ev outbox.Event
		var payload []byte
		var gap bool
		if err := rows.Scan(&ev.ID, &ev.ClientID, &ev.Type, &ev.OrderID, &payload, &ev.CreatedAt, &gap); err != nil {
			return nil, fmt.Errorf("resend: events of the window: %w", err)
		}
		*all++
		if gap {
			ev.Payload = payload
			missing = append(missing, ev)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("resend: events of the window: %w", err)
	}
	return missing, nil
}
