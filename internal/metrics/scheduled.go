package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tekrar/tekrar/checkout/installments"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/internal/schedule"
)

// scheduledMetrics are the scheduled tasks' runs and the money work they do, counted by the
// process that did it. What the scrape reads of them from Postgres is in backlog.go.
type scheduledMetrics struct {
	runs         *prometheus.CounterVec
	runDuration  *prometheus.HistogramVec
	installments *prometheus.CounterVec
	settleDays   prometheus.Counter
	settleItems  prometheus.Counter
	settleAdjust prometheus.Counter
	settleFailed prometheus.Counter
}

// runOutcomes are the outcomes of a finished run (tekrar_scheduled_runs_total's outcome).
var runOutcomes = []string{schedule.OutcomeOK, schedule.OutcomeFailed, schedule.OutcomeSkipped}

// installmentResults are what a run did to each installment it took
// (tekrar_installments_total's result).
var installmentResults = []string{"charged", "retry", "attention", "unknown", "fenced"}

func newScheduledMetrics() scheduledMetrics {
	s := scheduledMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_scheduled_runs_total",
			Help: "Scheduled task runs this process finished, by task and outcome: ok, failed, skipped (the task's previous run held its lock).",
		}, []string{"task", "outcome"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tekrar_scheduled_run_duration_seconds",
			Help:    "How long the scheduled tasks' runs of this process took, by task (ok and failed runs; a skipped run did nothing).",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"task"}),
		installments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_installments_total",
			Help: "Installment attempts this process's installment runs recorded, by result: charged, retry (declined, tried again later), attention (declined on the last retry, or refused: an operator's), unknown (the provider did not answer), fenced (another process took it over).",
		}, []string{"result"}),
		settleDays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tekrar_settlement_days_total",
			Help: "Business days this process's settlement passes settled (a settlement written for one client's day).",
		}),
		settleItems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tekrar_settlement_items_total",
			Help: "Money movements this process's settlement passes counted on their own day.",
		}),
		settleAdjust: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tekrar_settlement_adjustments_total",
			Help: "Money movements of already settled days that this process's settlement passes counted late, as adjustments.",
		}),
		settleFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tekrar_settlement_client_failures_total",
			Help: "Clients whose settlement stopped on an error in a pass of this process (the pass goes on with the others).",
		}),
	}
	for _, r := range installmentResults {
		s.installments.WithLabelValues(r)
	}
	return s
}

func (s scheduledMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.runs, s.runDuration, s.installments, s.settleDays, s.settleItems,
		s.settleAdjust, s.settleFailed}
}

// ScheduledTasks names the tasks this process's scheduler runs: their series start at 0,
// and the scrape reads their last success from Postgres. Call it before serving metrics.
func (m *Metrics) ScheduledTasks(names []string) {
	for _, n := range names {
		for _, o := range runOutcomes {
			m.sched.runs.WithLabelValues(n, o)
		}
		m.sched.runDuration.WithLabelValues(n)
	}
	m.backlog.setTasks(names)
}

// ScheduledRun counts one finished run of a scheduled task (schedule.Config.Observe).
func (m *Metrics) ScheduledRun(r schedule.Run, took time.Duration) {
	if !r.Outcome.Valid {
		return
	}
	m.sched.runs.WithLabelValues(r.Task, r.Outcome.String).Inc()
	if r.Outcome.String != schedule.OutcomeSkipped {
		m.sched.runDuration.WithLabelValues(r.Task).Observe(took.Seconds())
	}
}

// Installments counts what one installment run did (installments.Config.Observe); a run
// that stopped on an error still did what it counted.
func (m *Metrics) Installments(res installments.Result, _ error) {
	for r, n := range map[string]int{"charged": res.Charged, "retry": res.Retry, "attention": res.Attention,
		"unknown": res.Unknown, "fenced": res.Fenced} {
		m.sched.installments.WithLabelValues(r).Add(float64(n))
	}
}

// Settlement counts what one settlement pass did (settlement.Config.Observe).
func (m *Metrics) Settlement(res settlement.Result, _ error) {
	m.sched.settleDays.Add(float64(res.Settled))
	m.sched.settleItems.Add(float64(res.Items))
	m.sched.settleAdjust.Add(float64(res.Adjustments))
	m.sched.settleFailed.Add(float64(res.Failed))
}
