package deliveries

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/db"
)

// The retry schedule: the first retry FirstRetry after a failed attempt, each next one
// twice as late, up to MaxRetryDelay between attempts, each delay shortened or lengthened by
// up to a fifth at random (so that endpoints that failed together are not retried in
// lockstep), until Horizon after the delivery was created. An attempt that fails at or
// after the horizon kills the delivery.
const (
	FirstRetry     = 30 * time.Second
	MaxRetryDelay  = 6 * time.Hour
	Horizon        = 72 * time.Hour
	AttemptTimeout = 10 * time.Second
)

// Bounds of what an attempt records of the endpoint's answer.
const (
	maxErrorExcerpt    = 500
	maxResponseExcerpt = 1024
)

// Delivery states.
const (
	StatePending   = "pending"
	StateSucceeded = "succeeded"
	StateDead      = "dead"
)

// Deliverer makes the attempts of deliveries.
type Deliverer struct {
	DB     *sqlx.DB
	Sealer *Sealer
	Client *http.Client // NewHTTPClient's, under the policy
	Logger *slog.Logger
	// Horizon is how long a delivery is retried (zero: Horizon); Now and Jitter (a number
	// in [0, 1)) are the clock and the randomness, for tests.
	Horizon time.Duration
	Now     func() time.Time
	Jitter  func() float64
	// FirstRetry is the first delay of the schedule (zero: FirstRetry); tests shorten it.
	FirstRetry time.Duration
	// Observe, when not nil, is told every scheduled or manual attempt's outcome (metrics).
	Observe func(Outcome, error)
	// Jobs queues, in the transaction that disables an endpoint, the notice to its client
	// (NoticeArgs); nil: no notice is queued, which is logged.
	Jobs *river.Client[*sql.Tx]
	// InFlight bounds the attempts in flight per endpoint and per client (lease.go); the
	// zero value is the defaults. Every process must use the same: the handler's fan-out too.
	InFlight InFlight
}

func (d *Deliverer) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Deliverer) horizon() time.Duration {
	if d.Horizon > 0 {
		return d.Horizon
	}
	return Horizon
}

// RetryDelay is the delay after the n-th failed attempt (n from 1), before jitter, for a
// schedule that starts at first.
func RetryDelay(first time.Duration, n int) time.Duration {
	delay := first
	for i := 1; i < n && delay < MaxRetryDelay; i++ {
		delay *= 2
	}
	return min(delay, MaxRetryDelay)
}

func (d *Deliverer) jittered(n int) time.Duration {
	j := rand.Float64
	if d.Jitter != nil {
		j = d.Jitter
	}
	first := FirstRetry
	if d.FirstRetry > 0 {
		first = d.FirstRetry
	}
	base := RetryDelay(first, n)
	return time.Duration(float64(base) * (0.8 + 0.4*j()))
}

// Outcome is what one attempt left the delivery as.
type Outcome struct {
	State  string    // pending, succeeded or dead
	NextAt time.Time // pending: when the next attempt is due
	Status int       // the endpoint's HTTP status; 0 when none came
	// Attempted is false when nothing was sent: the delivery was finished already, or its
	// endpoint was disabled or deleted (the delivery is then dead).
	Attempted bool
	// Disabled: this attempt disabled the endpoint (its notice is queued).
	Disabled bool
}

type deliveryRow struct {
	ID         int64     `db:"id"`
	EventID    string    `db:"event_id"`
	EndpointID int64     `db:"endpoint_id"`
	Payload    string    `db:"payload"`
	State      string    `db:"state"`
	Attempts   int       `db:"attempts"`
	CreatedAt  time.Time `db:"created_at"` // the horizon's start: the event's time, or the resend's (resent_at)
	URL        string    `db:"url"`
	Disabled   bool      `db:"disabled"`
	Deleted    bool      `db:"deleted"`
}

// Attempt sends delivery id once and records the attempt. A scheduled attempt (manual
// false) does nothing to a delivery that is finished; an operator's redelivery (manual)
// sends a finished one again, with the same body and webhook-id. A failure before the
// horizon leaves the delivery pending with its next attempt due at NextAt; at or past it,
// the delivery is dead, and its endpoint is disabled when none of its deliveries
// succeeded during the whole horizon.
//
// The returned error is for failures of tekrar's own (the database); a failed attempt is
// an Outcome, not an error.
func (d *Deliverer) Attempt(ctx context.Context, id int64, manual bool) (Outcome, error) {
	var r deliveryRow
	err := d.DB.GetContext(ctx, &r, loadDeliverySQL, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Outcome{}, ErrDeliveryNotFound
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("load delivery %d: %w", id, err)
	}
	if r.State != StatePending && !manual {
		return Outcome{State: r.State}, nil
	}
	if r.Deleted || (r.Disabled && !manual) {
		why := "endpoint disabled"
		if r.Deleted {
			why = "endpoint deleted"
		}
		if _, err := d.DB.ExecContext(ctx, killDeliverySQL, id, d.now(), why); err != nil {
			return Outcome{}, fmt.Errorf("end delivery %d: %w", id, err)
		}
		return Outcome{State: StateDead}, nil
	}
	keys, err := signingKeys(ctx, d.DB, d.Sealer, r.EndpointID, d.now())
	if err != nil {
		return Outcome{}, err
	}
	sent, started := d.now(), time.Now()
	status, excerpt, sendErr := d.send(ctx, r, keys, sent)
	latency := time.Since(started) // the wall clock's: a test's clock does not move during a request
	return d.record(ctx, r, manual, sent, latency, status, excerpt, sendErr)
}

// send makes the HTTP request: the stored payload, signed with every key.
func (d *Deliverer) send(ctx context.Context, r deliveryRow, keys []stdwebhook.Key, at time.Time) (int, string, error) {
	body := []byte(r.Payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for name, v := range stdwebhook.Headers(r.EventID, at, body, keys...) {
		req.Header[name] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tekrar-webhooks/1")
	resp, err := d.Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseExcerpt))
	return resp.StatusCode, excerpt(string(b), maxResponseExcerpt), nil
}

// record writes the attempt and moves the delivery on, in one transaction.
func (d *Deliverer) record(ctx context.Context, r deliveryRow, manual bool, at time.Time, latency time.Duration,
	status int, respExcerpt string, sendErr error) (Outcome, error) {
	out := Outcome{Status: status, Attempted: true}
	var errText *string
	switch {
	case sendErr != nil:
		s := excerpt(sendErr.Error(), maxErrorExcerpt)
		errText = &s
	case status < 200 || status > 299:
		s := fmt.Sprintf("HTTP %d", status)
		errText = &s
	}
	var statusCol *int
	if status != 0 {
		statusCol = &status
	}
	now := d.now()
	var next, finished *time.Time
	switch {
	case errText == nil:
		out.State = StateSucceeded
		finished = &now
	case manual && r.State != StatePending:
		// A failed redelivery leaves a finished delivery as it was.
		out.State = r.State
		finished = &now
	case !now.Before(r.CreatedAt.Add(d.horizon())):
		out.State = StateDead
		finished = &now
	case manual:
		out.State = StatePending // a failed redelivery leaves the schedule as it was
	default:
		out.State = StatePending
		at := now.Add(d.jittered(r.Attempts + 1))
		if end := r.CreatedAt.Add(d.horizon()); at.After(end) {
			at = end // the last attempt is made at the horizon
		}
		next = &at
		out.NextAt = at
	}
	// The attempt is recorded even when the job's context ended during the request (its
	// timeout, a shutdown): what the endpoint was sent must show in the console.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	disabled := false
	err := db.InTx(ctx, d.DB, "record webhook attempt", func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, insertAttemptSQL, r.ID, at, manual, statusCol,
			latency.Milliseconds(), errText, nullable(respExcerpt)); err != nil {
			return fmt.Errorf("record attempt of delivery %d: %w", r.ID, err)
		}
		if _, err := tx.ExecContext(ctx, recordAttemptSQL, r.ID, at, statusCol, out.State, next, finished, errText); err != nil {
			return fmt.Errorf("record attempt of delivery %d: %w", r.ID, err)
		}
		if out.State == StateDead && r.State == StatePending {
			reason := fmt.Sprintf("every delivery failed for %s (the retry horizon); last: %s", d.horizon(), *errText)
			res, err := tx.ExecContext(ctx, disableEndpointSQL, r.EndpointID, r.CreatedAt, now, excerpt(reason, 500))
			if err != nil {
				return fmt.Errorf("disable endpoint %d: %w", r.EndpointID, err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				disabled = true
				if d.Logger != nil {
					d.Logger.Warn("webhook endpoint disabled: it failed for the whole retry horizon", "endpoint_id", r.EndpointID)
				}
				if d.Jobs == nil {
					if d.Logger != nil {
						d.Logger.Warn("webhook endpoint disabled: no job client, its client is not written to", "endpoint_id", r.EndpointID)
					}
				} else if _, err := d.Jobs.InsertTx(ctx, tx.Tx, NoticeArgs{EndpointID: r.EndpointID, DisabledAt: now}, nil); err != nil {
					return fmt.Errorf("queue the notice of disabled endpoint %d: %w", r.EndpointID, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	out.Disabled = disabled
	return out, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// excerpt cuts s to at most n characters of valid UTF-8 without NULs (Postgres cannot
// store them).
func excerpt(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
