package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/completer"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/sweeper"
)

// Completer exposes what this process's completer has done (completer.Completer.Totals),
// read at scrape time: keys driven to an outcome and the compensations of given-up keys.
func (m *Metrics) Completer(totals func() completer.Result) {
	counter := func(name, help string, labels prometheus.Labels, read func(completer.Result) int) {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(read(totals())) }))
	}
	const keys = "tekrar_completer_keys_total"
	const keysHelp = "Abandoned keys this process's completer took on, by result: completed (settled from the provider), canceled, attention (handed to an operator), retry (the provider could not answer)."
	counter(keys, keysHelp, prometheus.Labels{"result": "completed"}, func(r completer.Result) int { return r.Completed })
	counter(keys, keysHelp, prometheus.Labels{"result": "canceled"}, func(r completer.Result) int { return r.Canceled })
	counter(keys, keysHelp, prometheus.Labels{"result": "attention"}, func(r completer.Result) int { return r.Attention })
	counter(keys, keysHelp, prometheus.Labels{"result": "retry"}, func(r completer.Result) int { return r.Retry })
	const comp = "tekrar_compensations_total"
	const compHelp = "Compensations of given-up keys this process settled, by result: refunded (a late charge was found and refunded), no_charge (none was made)."
	counter(comp, compHelp, prometheus.Labels{"result": "refunded"}, func(r completer.Result) int { return r.Compensated })
	counter(comp, compHelp, prometheus.Labels{"result": "no_charge"}, func(r completer.Result) int { return r.CompensationsOK })
}

// ReplayCache exports the process's replay cache (checkout.ReplayCache): the replays it
// answered, what it holds, and whether it answers now (its listener hears the process's
// beats), so that an operator sees a cache that stopped.
func (m *Metrics) ReplayCache(c *checkout.ReplayCache) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tekrar_replay_cache_hits_total",
			Help: "Replays this process answered from memory, without a database read."},
			func() float64 { return float64(c.Hits()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tekrar_replay_cache_bytes",
			Help: "Bytes of completed answers the replay cache holds, as TEKRAR_REPLAY_CACHE_BYTES counts them."},
			func() float64 { return float64(c.Bytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tekrar_replay_cache_entries",
			Help: "Completed answers the replay cache holds."},
			func() float64 { return float64(c.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tekrar_replay_cache_serving",
			Help: "1 while the replay cache answers (its listener hears this process's beats), else 0."},
			func() float64 {
				if c.Serving() {
					return 1
				}
				return 0
			}),
	)
}

// Sweep counts one sweeper pass (sweeper.Config.Observe).
func (m *Metrics) Sweep(res sweeper.Result, err error) {
	switch {
	case err != nil:
		m.sweeps.WithLabelValues("failed").Inc()
	default:
		m.sweeps.WithLabelValues("swept").Inc()
	}
	m.swept.WithLabelValues("keys_tombstoned").Add(float64(res.KeysTombstoned))
	m.swept.WithLabelValues("keys_deleted").Add(float64(res.KeysDeleted))
	m.swept.WithLabelValues("tombstones_forgotten").Add(float64(res.TombstonesForgotten))
	m.swept.WithLabelValues("events_deleted").Add(float64(res.EventsDeleted))
}

// Delivery counts one client webhook delivery attempt (deliveries.Deliverer.Observe).
func (m *Metrics) Delivery(out deliveries.Outcome, err error) {
	outcome := "error" // tekrar's own failure (the database): River retries the job
	switch {
	case err != nil:
	case !out.Attempted:
		outcome = "skipped"
	case out.State == deliveries.StateSucceeded:
		outcome = "succeeded"
	case out.State == deliveries.StatePending:
		outcome = "retry"
	default:
		outcome = "dead"
	}
	m.deliveries.WithLabelValues(outcome).Inc()
	if err == nil && out.Disabled {
		m.disabled.Inc()
	}
}

// JobEvents are the River events Jobs counts.
var JobEvents = []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed,
	river.EventKindJobCancelled, river.EventKindJobSnoozed}

// Jobs counts the jobs this process works, by kind and outcome, from River's events until
// ctx ends or events is closed.
func (m *Metrics) Jobs(ctx context.Context, events <-chan *river.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev == nil || ev.Job == nil {
				continue
			}
			outcome := map[river.EventKind]string{river.EventKindJobCompleted: "completed", river.EventKindJobFailed: "failed",
				river.EventKindJobCancelled: "cancelled", river.EventKindJobSnoozed: "snoozed"}[ev.Kind]
			if outcome == "" {
				continue
			}
			m.jobs.WithLabelValues(ev.Job.Kind, outcome).Inc()
		}
	}
}

// Dispatched counts a batch of the outbox's dispatcher as jobs of the kind outbox_dispatch,
// the name an event's dispatch had when each was a River job, so that dashboards and alerts
// read one series across the change: each event dispatched is a completed one, each failed
// attempt a failed one.
func (m *Metrics) Dispatched(dispatched, failed int) {
	m.jobs.WithLabelValues("outbox_dispatch", "completed").Add(float64(dispatched))
	m.jobs.WithLabelValues("outbox_dispatch", "failed").Add(float64(failed))
}
