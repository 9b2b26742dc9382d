package app

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/receipts"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/metrics"
	"github.com/tekrar/tekrar/internal/schedule"
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
	// Periodic are jobs River's leader inserts on a schedule (internal/schedule).
	Periodic []*river.PeriodicJob
}

// consumers lists what every tekrar process runs on the outbox. A part of tekrar that
// reacts to events adds its Consumer here.
func consumers(cfg config.Server, db *sql.DB, logger *slog.Logger, m *metrics.Metrics, now func() time.Time) []Consumer {
	return []Consumer{receiptsConsumer(cfg, db, logger, m, now)}
}

// receiptsConsumer e-mails receipts of paid and refunded orders through cfg.SMTP, or keeps
// them for the console when no SMTP server is configured (docs/receipts.md); each client's
// receipts within its bounds (TEKRAR_RECEIPTS_PER_MINUTE, TEKRAR_RECEIPTS_PER_DAY), counted
// on the app's clock, and those over them refused and counted in m.
func receiptsConsumer(cfg config.Server, db *sql.DB, logger *slog.Logger, m *metrics.Metrics, now func() time.Time) Consumer {
	sender := &receipts.Sender{DB: db, Mailer: &receipts.Mailer{Server: cfg.SMTP, From: cfg.SMTPFrom}}
	rc := &receipts.Recorder{From: cfg.SMTPFrom, Send: cfg.SMTP.Configured(), Now: now,
		PerMinute: cfg.ReceiptsPerMinute, PerDay: cfg.ReceiptsPerDay, Refused: m.ReceiptRefused}
	return Consumer{
		Handler:    &receipts.Handler{Recorder: rc, Logger: logger.With("component", "receipts")},
		AddWorkers: func(w *river.Workers) { receipts.AddWorkers(w, sender) },
		Queues:     map[string]river.QueueConfig{receipts.Queue: {MaxWorkers: 5}},
	}
}

// WithConsumers adds consumers to the ones every process runs; tests use it.
func WithConsumers(cs ...Consumer) Option {
	return func(o *options) { o.consumers = append(o.consumers, cs...) }
}

// newRiver builds the process's River client with the outbox's dispatcher, every
// consumer's handler, workers and queues, and the dispatcher's counts in m.
func newRiver(cfg config.Server, db *sql.DB, logger *slog.Logger, m *metrics.Metrics, cs []Consumer) (*outbox.Client, error) {
	workers := river.NewWorkers()
	queues := map[string]river.QueueConfig{}
	handlers := make([]outbox.Handler, 0, len(cs))
	var periodic []*river.PeriodicJob
	for _, c := range cs {
		periodic = append(periodic, c.Periodic...)
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
	return outbox.NewClient(db, workers, outbox.Config{
		Handlers:        handlers,
		ObserveDispatch: m.Dispatched,
		Workers:         cfg.OutboxWorkers,
		PollInterval:    cfg.OutboxPoll,
		RescueAfter:     cfg.OutboxRescueAfter,
		Queues:          queues,
		PeriodicJobs:    periodic,
		ID:              riverID(),
		Logger:          logger.With("component", "river"),
	})
}

// riverClients counts the River clients this process made (tests run several in one).
var riverClients atomic.Int64

// riverID names this process's River client as run records name the process (host:pid),
// so that the console's leader is a process an operator can find; the count keeps two
// clients of one process (tests) apart.
func riverID() string {
	return fmt.Sprintf("%s-%d", schedule.Process(), riverClients.Add(1))
}

// riverStopTimeout is how long jobs in flight may finish when the process stops, before
// their contexts are cancelled; a cancelled job's transaction rolls back and the job runs
// again elsewhere (River rescues it), which handlers are written to survive.
const riverStopTimeout = 10 * time.Second

// runRiver works jobs until ctx ends, then stops River: first softly, then by cancelling.
func runRiver(ctx context.Context, c *outbox.Client, logger *slog.Logger) {
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
