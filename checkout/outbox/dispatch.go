package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
)

// Handler reacts to events. See the package documentation for its contract: idempotent,
// fast, writes only in tx.
type Handler interface {
	HandleEvent(ctx context.Context, tx *sql.Tx, ev Event) error
}

// HandlerFunc makes a function a Handler.
type HandlerFunc func(ctx context.Context, tx *sql.Tx, ev Event) error

// HandleEvent calls f.
func (f HandlerFunc) HandleEvent(ctx context.Context, tx *sql.Tx, ev Event) error {
	return f(ctx, tx, ev)
}

type jobsKey struct{}

// Jobs is the River client a handler inserts its own jobs with, in the dispatch's
// transaction; nil outside a dispatch, or when the dispatcher has no client.
func Jobs(ctx context.Context) *river.Client[*sql.Tx] {
	c, _ := ctx.Value(jobsKey{}).(*river.Client[*sql.Tx])
	return c
}

// withJobs returns ctx carrying the dispatcher's River client for its handlers (Jobs).
func withJobs(ctx context.Context, jobs *river.Client[*sql.Tx]) context.Context {
	return context.WithValue(ctx, jobsKey{}, jobs)
}

// Defaults of a Dispatcher's settings.
const (
	// DefaultBatch is how many events one transaction dispatches at most: enough that a
	// backlog costs a transaction per hundred events, few enough that a batch's locks and
	// its rollback, when a handler fails, stay small.
	DefaultBatch = 100
	// DefaultMaxAttempts is how many failed dispatches an event has before it is
	// discarded: with the backoff (attempt⁴ seconds, at most a day), about ten days.
	DefaultMaxAttempts = 25
)

// Dispatcher hands the outbox's events to the handlers, many in a transaction. Each of
// its loops takes the oldest available rows of outbox_queue (FOR UPDATE SKIP LOCKED, so
// that the loops of every process share them), deletes them, calls every handler for
// each event in turn and commits: the rows are gone exactly when the handlers' work
// committed. Nothing else marks an event as taken: a dispatcher that dies loses its
// connection and its transaction with it, and one that stalls is ended by Postgres after
// Hold (idle_in_transaction_session_timeout); either way its rows are available again, and
// its transaction, which committed nothing, cannot commit later.
//
// When a handler fails, the batch rolls back and its events are dispatched again one a
// transaction, so that an event that cannot be dispatched holds back no other: each that
// fails again waits attempt⁴ seconds (at most a day) and is discarded after MaxAttempts,
// its last error kept for the console.
type Dispatcher struct {
	DB       *sql.DB
	Handlers []Handler
	// Jobs is the River client handlers insert their jobs with (Jobs(ctx)).
	Jobs *river.Client[*sql.Tx]
	// Loops is how many batches one process dispatches at once; 0: one.
	Loops int
	// Batch is the most events a transaction dispatches; 0: DefaultBatch.
	Batch int
	// Poll is how long a loop that found fewer than Batch events waits before it looks
	// again: the longest an event waits for dispatch when the process is idle; 0: a second.
	Poll time.Duration
	// Hold is the longest a batch's transaction may stay idle between two statements
	// before Postgres ends it (a frozen process), and half the longest it may run; 0: 30
	// seconds.
	Hold time.Duration
	// MaxAttempts: see DefaultMaxAttempts.
	MaxAttempts int
	// Observe, when set, is told of each batch: how many events were dispatched and how
	// many attempts failed.
	Observe func(dispatched, failed int)
	Logger  *slog.Logger
}

func (d *Dispatcher) batch() int { return cmpOr(d.Batch, DefaultBatch) }
func (d *Dispatcher) hold() time.Duration {
	return cmpOr(d.Hold, 30*time.Second)
}
func (d *Dispatcher) poll() time.Duration { return cmpOr(d.Poll, time.Second) }

func cmpOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Run dispatches until stop is closed (each loop ends after its batch) or ctx ends (a
// batch in flight rolls back).
func (d *Dispatcher) Run(ctx context.Context, stop <-chan struct{}) {
	var wg sync.WaitGroup
	loops := cmpOr(d.Loops, 1)
	for i := range loops {
		// Spread over the poll, so that an idle process looks every poll/loops.
		first := d.poll() * time.Duration(i) / time.Duration(loops)
		wg.Add(1)
		go func() { defer wg.Done(); d.loop(ctx, stop, first) }()
	}
	wg.Wait()
}

func (d *Dispatcher) loop(ctx context.Context, stop <-chan struct{}, first time.Duration) {
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-timer.C:
		}
		n, err := d.Dispatch(ctx)
		if err != nil && ctx.Err() == nil && d.Logger != nil {
			d.Logger.Error("dispatch outbox events", "err", err)
		}
		if err == nil && n >= d.batch() {
			timer.Reset(0) // more may be waiting
			continue
		}
		timer.Reset(d.poll())
	}
}

// Dispatch dispatches one batch of available events and returns how many it dispatched.
func (d *Dispatcher) Dispatch(ctx context.Context) (int, error) {
	n, failed, err := d.dispatch(ctx, claimSQL, d.batch())
	if err == nil || len(failed) == 0 {
		d.observe(n, 0)
		return n, err
	}
	if len(failed) == 1 { // it was alone: that was its attempt
		d.observe(0, 1)
		if rerr := d.failed(ctx, failed[0], err); rerr != nil {
			return 0, errors.Join(err, rerr)
		}
		d.logFailed(failed[0], err)
		return 0, nil
	}
	// The batch rolled back: one event a transaction, so that only those that fail again wait.
	dispatched, attempts := 0, 0
	for _, id := range failed {
		n, _, err := d.dispatch(ctx, claimOneSQL, id)
		dispatched += n
		if err == nil {
			continue
		}
		attempts++
		if rerr := d.failed(ctx, id, err); rerr != nil {
			d.observe(dispatched, attempts)
			return dispatched, errors.Join(err, rerr)
		}
		d.logFailed(id, err)
	}
	d.observe(dispatched, attempts)
	return dispatched, nil
}

func (d *Dispatcher) logFailed(id string, err error) {
	if d.Logger != nil {
		d.Logger.Warn("event not dispatched: retried after its backoff, or discarded after its last attempt", "event", id, "err", err)
	}
}

func (d *Dispatcher) observe(dispatched, failed int) {
	if d.Observe != nil && dispatched+failed > 0 {
		d.Observe(dispatched, failed)
	}
}

// dispatch claims events with claim (its one argument arg) and hands them to the handlers
// in one transaction. It returns how many it dispatched, and, when it failed after the
// claim, the ids of the events it had claimed, which are in the queue again.
func (d *Dispatcher) dispatch(ctx context.Context, claim string, arg any) (int, []string, error) {
	// Postgres ends the transaction after Hold idle (holdSQL), whatever this process does;
	// the context, a backstop for a batch that runs but never ends, at twice that.
	ctx, cancel := context.WithTimeout(ctx, 2*d.hold())
	defer cancel()
	tx, err := d.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("dispatch: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	if _, err := tx.ExecContext(ctx, holdSQL, fmt.Sprintf("%dms", d.hold().Milliseconds())); err != nil {
		return 0, nil, fmt.Errorf("dispatch: %w", err)
	}
	events, err := claimed(ctx, tx, claim, arg)
	if err != nil {
		return 0, nil, err
	}
	if len(events) == 0 {
		return 0, nil, nil
	}
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.ID
	}
	hctx := withJobs(ctx, d.Jobs)
	for _, ev := range events {
		for _, h := range d.Handlers {
			if err := h.HandleEvent(hctx, tx, ev); err != nil {
				return 0, ids, fmt.Errorf("dispatch %s %s to %T: %w", ev.Type, ev.ID, h, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, ids, fmt.Errorf("dispatch %d events: commit: %w", len(events), err)
	}
	return len(events), nil, nil
}

func claimed(ctx context.Context, tx *sql.Tx, claim string, arg any) ([]Event, error) {
	rows, err := tx.QueryContext(ctx, claim, arg)
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	defer rows.Close()
	var events []Event
	for rows.Next() {
		var ev Event
		var payload []byte
		if err := rows.Scan(&ev.ID, &ev.ClientID, &ev.Type, &ev.OrderID, &payload, &ev.CreatedAt); err != nil {
			return nil, fmt.Errorf("claim events: %w", err)
		}
		ev.Payload = payload
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	return events, nil
}

// failed records a failed dispatch of event id: its attempt, its error, when it may be
// tried again, and whether it is discarded. An event another dispatcher took and
// dispatched meanwhile has no row left, and nothing is recorded.
func (d *Dispatcher) failed(ctx context.Context, id string, cause error) error {
	msg := cause.Error()
	if len(msg) > 2000 {
		msg = strings.ToValidUTF8(msg[:2000], "")
	}
	if _, err := d.DB.ExecContext(ctx, failedSQL, id, msg, cmpOr(d.MaxAttempts, DefaultMaxAttempts)); err != nil {
		return fmt.Errorf("record failed dispatch of %s: %w", id, err)
	}
	return nil
}
