package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
)

// Config is how a process dispatches events and runs River.
type Config struct {
	// Handlers are called for each event, in this order (the Dispatcher's).
	Handlers []Handler
	// Workers is how many batches of events one process dispatches at once (the
	// Dispatcher's Loops); 0: ten.
	Workers int
	// Batch is the most events one transaction dispatches; 0: DefaultBatch.
	Batch int
	// MaxAttempts is how many failed dispatches discard an event; 0: DefaultMaxAttempts.
	MaxAttempts int
	// PollInterval is how often an idle process looks for new events and jobs: the
	// longest an event waits before it is dispatched. River's database/sql driver has no
	// LISTEN, so it is also River's fetch interval.
	PollInterval time.Duration
	// RescueAfter is how long a job may be running before River takes it as lost with its
	// process and runs it again; jobs time out at half of it (at most a minute), and so
	// does a dispatch's transaction (the Dispatcher's Hold). 0: an hour.
	RescueAfter time.Duration
	// Queues are River's queues (webhook deliveries, receipts) with their worker counts.
	Queues map[string]river.QueueConfig
	// PeriodicJobs are inserted by River's elected leader on their schedules
	// (internal/schedule).
	PeriodicJobs []*river.PeriodicJob
	// ObserveDispatch, when set, is told of each dispatched batch (the Dispatcher's Observe).
	ObserveDispatch func(dispatched, failed int)
	// ID names this process among River's clients; empty lets River choose.
	ID     string
	Logger *slog.Logger
}

// Client is a process's River client with the outbox's Dispatcher: Start and Stop run and
// stop both. Everything else is River's (InsertTx, Subscribe, ...).
type Client struct {
	*river.Client[*sql.Tx]
	Dispatcher *Dispatcher

	works   bool // River has queues to work
	mu      sync.Mutex
	stop    chan struct{}      // closed by Stop: loops end after their batch
	cancel  context.CancelFunc // StopAndCancel: a batch in flight rolls back
	stopped chan struct{}      // closed when every loop ended
	closed  bool               // stop is closed
}

// NewClient returns the process's River client over db, with the queues and workers of
// cfg, and its Dispatcher. Start it to dispatch events and work jobs (one client per
// process; River elects a leader among replicas for its maintenance); an unstarted client
// only inserts.
func NewClient(db *sql.DB, workers *river.Workers, cfg Config) (*Client, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 10
	}
	cooldown := river.FetchCooldownDefault
	if cfg.PollInterval > 0 && cfg.PollInterval < cooldown {
		cooldown = cfg.PollInterval
	}
	timeout := min(cfg.RescueAfter/2, river.JobTimeoutDefault)
	if cfg.RescueAfter <= 0 {
		timeout = river.JobTimeoutDefault
	}
	// River starts only with a queue to work: a client of the outbox alone (tests) has none
	// and runs only the dispatcher.
	works := len(cfg.Queues) > 0
	if !works {
		workers = nil
	}
	rc, err := river.NewClient(riverdatabasesql.New(db), &river.Config{
		ID:                   cfg.ID,
		JobTimeout:           timeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		FetchCooldown:        cooldown,
		Logger:               cfg.Logger,
		PeriodicJobs:         cfg.PeriodicJobs,
		PollOnly:             true,
		FetchPollInterval:    cfg.PollInterval,
		Queues:               cfg.Queues,
		Workers:              workers,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	d := &Dispatcher{DB: db, Handlers: cfg.Handlers, Jobs: rc, Loops: cfg.Workers, Batch: cfg.Batch,
		Poll: cfg.PollInterval, Hold: timeout, MaxAttempts: cfg.MaxAttempts, Observe: cfg.ObserveDispatch,
		Logger: cfg.Logger}
	return &Client{Client: rc, Dispatcher: d, works: works}, nil
}

// Start starts River and the dispatcher's loops. Cancelling ctx stops both hard.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		return errors.New("outbox: client already started")
	}
	if c.works {
		if err := c.Client.Start(ctx); err != nil {
			return err
		}
	}
	dctx, cancel := context.WithCancel(ctx)
	c.stop, c.cancel, c.stopped = make(chan struct{}), cancel, make(chan struct{})
	go func(stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		c.Dispatcher.Run(dctx, stop)
	}(c.stop, c.stopped)
	return nil
}

// Stop lets the dispatcher's batches in flight commit and River's jobs finish, until ctx
// ends; River is stopped even when the dispatcher was not stopped in time.
func (c *Client) Stop(ctx context.Context) error {
	err := c.stopDispatcher(ctx, false)
	if !c.works {
		return err
	}
	return errors.Join(err, c.Client.Stop(ctx))
}

// StopAndCancel stops the dispatcher and River at once: batches and jobs in flight are
// cancelled, their transactions rolled back.
func (c *Client) StopAndCancel(ctx context.Context) error {
	err := c.stopDispatcher(ctx, true)
	if !c.works {
		return err
	}
	return errors.Join(err, c.Client.StopAndCancel(ctx))
}

func (c *Client) stopDispatcher(ctx context.Context, hard bool) error {
	c.mu.Lock()
	stop, cancel, stopped := c.stop, c.cancel, c.stopped
	if stop != nil && !c.closed {
		close(stop)
		c.closed = true
	}
	c.mu.Unlock()
	if stop == nil {
		return nil
	}
	if hard {
		cancel()
	}
	select {
	case <-stopped:
		cancel()
		return nil
	case <-ctx.Done():
		// Batches in flight are cancelled (their transactions roll back); a handler that
		// ignores its context does not hold the process's shutdown.
		cancel()
		return fmt.Errorf("outbox: stop dispatcher: %w", ctx.Err())
	}
}
