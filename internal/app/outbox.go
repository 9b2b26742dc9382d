package app

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/config"
)

// A Consumer is a part of tekrar that reacts to the outbox's events: its Handler, called in
// each event's dispatch transaction, and the River workers and queues of the jobs that
// handler inserts.
type Consumer struct {
	Handler outbox.Handler
	// AddWorkers registers the consumer's own job workers; nil if it has none.
	AddWorkers func(*river.Workers)
	// Queues are the consumer's own River queues with their worker counts.
	Queues map[string]river.QueueConfig
}

// consumers lists what every tekrar process runs on the outbox. A part of tekrar that
// reacts to events adds its Consumer here.
func consumers(_ config.Server, _ *sql.DB, _ *slog.Logger) []Consumer {
	return nil
}

// WithConsumers adds consumers to the ones every process runs; tests use it.
func WithConsumers(cs ...Consumer) Option {
	return func(o *options) { o.consumers = append(o.consumers, cs...) }
}

// newRiver builds the process's River client with the outbox's dispatch worker and every
// consumer's workers and queues.
func newRiver(cfg config.Server, db *sql.DB, logger *slog.Logger, cs []Consumer) (*river.Client[*sql.Tx], error) {
	workers := river.NewWorkers()
	queues := map[string]river.QueueConfig{}
	handlers := make([]outbox.Handler, 0, len(cs))
	for _, c := range cs {
		if c.Handler != nil {
			handlers = append(handlers, c.Handler)
		}
		if c.AddWorkers != nil {
			c.AddWorkers(workers)
		}
		for name, q := range c.Queues {
			queues[name] = q
		}
	}
	outbox.AddWorkers(workers, db, handlers...)
	return outbox.NewClient(db, workers, outbox.Config{
		Workers:      cfg.OutboxWorkers,
		PollInterval: cfg.OutboxPoll,
		RescueAfter:  cfg.OutboxRescueAfter,
		Queues:       queues,
		Logger:       logger.With("component", "river"),
	})
}

// riverStopTimeout is how long jobs in flight may finish when the process stops, before
// their contexts are cancelled; a cancelled job's transaction rolls back and the job runs
// again elsewhere (River rescues it), which handlers are written to survive.
const riverStopTimeout = 10 * time.Second

// runRiver works jobs until ctx ends, then stops River: first softly, then by cancelling.
func runRiver(ctx context.Context, c *river.Client[*sql.Tx], logger *slog.Logger) {
	// River's own context must outlive ctx: cancelling it is River's hard stop.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		logger.Error("river did not start: events wait for another process", "err", err)
		return
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), riverStopTimeout)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		logger.Warn("river soft stop timed out: cancelling jobs in flight", "err", err)
		hard, cancelHard := context.WithTimeout(context.Background(), riverStopTimeout)
		defer cancelHard()
		if err := c.StopAndCancel(hard); err != nil {
			logger.Error("river stop", "err", err)
		}
	}
}
