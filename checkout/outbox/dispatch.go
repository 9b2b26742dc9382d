package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
)

// Queue is the River queue dispatch jobs run on.
const Queue = "outbox"

// KindDispatch is the River kind of dispatch jobs. Migration 19's trigger inserts them by
// SQL under this name: renaming it needs a migration.
const KindDispatch = "outbox_dispatch"

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

// DispatchArgs is the job that hands one event to the handlers. The outbox's trigger
// inserts one per event; inserted from Go, it is unique per event all the same.
type DispatchArgs struct {
	EventID string `json:"event_id"`
}

// Kind is River's name for the job.
func (DispatchArgs) Kind() string { return KindDispatch }

// InsertOpts puts the job on the outbox queue, unique by event. Migration 19's trigger
// computes the same unique key.
func (DispatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

type dispatchWorker struct {
	river.WorkerDefaults[DispatchArgs]
	db       *sql.DB
	handlers []Handler
}

// AddWorkers registers the dispatch worker, which calls handlers in the order given.
func AddWorkers(w *river.Workers, db *sql.DB, handlers ...Handler) {
	river.AddWorker(w, &dispatchWorker{db: db, handlers: handlers})
}

// Work dispatches one event in one transaction: its handlers' rows and jobs commit
// together or not at all. The job itself is completed after that transaction, by River's
// batch completer: measured under first-arrival load, completing each job in its dispatch's
// transaction (river.JobCompleteTx, one statement per job) took 1.2 ms of Postgres's time a
// job, more than the order's own completion, and the dispatch fell behind the orders.
func (w *dispatchWorker) Work(ctx context.Context, job *river.Job[DispatchArgs]) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", job.Args.EventID, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	ev, err := Get(ctx, tx, job.Args.EventID)
	if errors.Is(err, sql.ErrNoRows) {
		// The trigger commits an event with its job, and nothing deletes events: a job
		// without its event was inserted by hand. Retrying cannot help.
		return river.JobCancel(fmt.Errorf("dispatch: %w", err))
	}
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	for _, h := range w.handlers {
		if err := h.HandleEvent(ctx, tx, ev); err != nil {
			return fmt.Errorf("dispatch %s %s to %T: %w", ev.Type, ev.ID, h, err)
		}
	}
	// Not river.JobCompleteTx (see above). A worker that dies between this commit and
	// River's completion leaves the job running, to be rescued and run again, which the
	// handlers' idempotence makes harmless.
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dispatch %s: commit: %w", ev.ID, err)
	}
	return nil
}

// Config is how a process runs River.
type Config struct {
	// Workers is how many outbox jobs one process runs at once.
	Workers int
	// PollInterval is how often an idle process looks for new jobs. River's database/sql
	// driver has no LISTEN, so this is also the longest an event waits for dispatch.
	PollInterval time.Duration
	// RescueAfter is how long a job may be running before River takes it as lost with its
	// process and runs it again; jobs time out at half of it (at most a minute). 0: an hour.
	RescueAfter time.Duration
	// Queues are further queues (webhook deliveries, receipts) with their worker counts.
	Queues map[string]river.QueueConfig
	// PeriodicJobs are inserted by River's elected leader on their schedules
	// (internal/schedule).
	PeriodicJobs []*river.PeriodicJob
	// ID names this process among River's clients; empty lets River choose.
	ID     string
	Logger *slog.Logger
}

// fetchCooldown is the least time between two fetches of the outbox's queue when it is
// busy (the other queues keep River's default). River fetches at
// most a queue's free workers at a time, and when it fetched as many as it had workers it
// fetches again when a job ends, but no sooner than this after the last fetch: River's
// default, 100 ms, let a process dispatch at most ten events (its TEKRAR_OUTBOX_WORKERS)
// each tenth of a second. Measured under first-arrival load: 332 orders a second, about 95
// events dispatched a second, and a backlog of 7,755 events after 30 s: at that rate,
// 80 s more of dispatching. At 10 ms the queue's workers are refilled as fast as they finish;
// an idle process still looks only every TEKRAR_OUTBOX_POLL.
const fetchCooldown = 10 * time.Millisecond

// NewClient returns a River client over db, with the outbox queue and cfg.Queues. Start it
// to work jobs (one client per process; River elects a leader among replicas for its
// maintenance); an unstarted client only inserts.
func NewClient(db *sql.DB, workers *river.Workers, cfg Config) (*river.Client[*sql.Tx], error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 10
	}
	outboxCooldown := fetchCooldown
	if cfg.PollInterval > 0 && cfg.PollInterval < outboxCooldown {
		outboxCooldown = cfg.PollInterval
	}
	queues := map[string]river.QueueConfig{Queue: {MaxWorkers: cfg.Workers, FetchCooldown: outboxCooldown}}
	for name, q := range cfg.Queues {
		queues[name] = q
	}
	cooldown := river.FetchCooldownDefault
	if cfg.PollInterval > 0 && cfg.PollInterval < cooldown {
		cooldown = cfg.PollInterval
	}
	timeout := min(cfg.RescueAfter/2, river.JobTimeoutDefault)
	if cfg.RescueAfter <= 0 {
		timeout = river.JobTimeoutDefault
	}
	c, err := river.NewClient(riverdatabasesql.New(db), &river.Config{
		ID:                   cfg.ID,
		JobTimeout:           timeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		FetchCooldown:        cooldown,
		Logger:               cfg.Logger,
		PeriodicJobs:         cfg.PeriodicJobs,
		PollOnly:             true,
		FetchPollInterval:    cfg.PollInterval,
		Queues:               queues,
		Workers:              workers,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return c, nil
}
