// Package metrics exposes tekrar's Prometheus metrics: requests, idempotency outcomes,
// payment provider calls, the background workers' work, the scheduled tasks' runs and the
// money work they do, the registers' batches, and backlogs read from Postgres at scrape
// time. It owns its own registry (not client_golang's global one), so that two apps
// in one test process do not share counters, and it is served on its own listener
// (TEKRAR_METRICS_ADDR), which need not face the internet.
//
// Every label has a bounded set of values: route patterns (never raw paths), methods,
// status codes, outcome names, client ids (operators create clients), job kinds, task
// names (registered by code). No
// idempotency key, order id or customer id is ever a label.
package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one process's metrics and the registry they are gathered from.
type Metrics struct {
	Registry *prometheus.Registry

	requests    *prometheus.HistogramVec
	idempotency *prometheus.CounterVec
	provider    *prometheus.HistogramVec
	sweeps      *prometheus.CounterVec
	swept       *prometheus.CounterVec
	jobs        *prometheus.CounterVec
	deliveries  *prometheus.CounterVec
	disabled    prometheus.Counter
	sched       scheduledMetrics
	pos         posMetrics
	backlog     *backlog

	receiptsRefused *prometheus.CounterVec // receipts.go
}

// New registers tekrar's metrics, the Go runtime's and the process's, db's pool statistics
// and the backlogs read from db at scrape time.
// doubleTap is the console's double-tap window (TEKRAR_DOUBLE_TAP_WINDOW).
func New(db *sqlx.DB, logger *slog.Logger, doubleTap time.Duration) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tekrar_http_request_duration_seconds",
			Help:    "HTTP requests by route pattern, method and status, and how long they took (its _count is the number of requests).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "status"}),
		idempotency: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_idempotency_requests_total",
			Help: "Keyed requests by client and by what the idempotency protocol made of them (docs/operations.md).",
		}, []string{"client", "outcome"}),
		provider: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tekrar_provider_call_duration_seconds",
			Help:    "Payment provider calls by operation and outcome, and how long they took.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"operation", "outcome"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_sweeper_passes_total",
			Help: "Sweeper passes of this process by result: swept, failed (a tick skipped because another pass held the lock is tekrar_scheduled_runs_total{task=\"sweep\",outcome=\"skipped\"}).",
		}, []string{"result"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_sweeper_rows_total",
			Help: "Rows the sweeper of this process changed, by what it did to them.",
		}, []string{"action"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_jobs_total",
			Help: "Outbox and scheduled jobs worked by this process, by job kind and outcome.",
		}, []string{"kind", "outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tekrar_webhook_delivery_attempts_total",
			Help: "Client webhook delivery attempts by what they left the delivery as: succeeded, retry, dead, skipped, error.",
		}, []string{"outcome"}),
		disabled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tekrar_webhook_endpoints_disabled_total",
			Help: "Client webhook endpoints this process disabled because they failed for the whole retry horizon (each notice is queued to the client's contact e-mail).",
		}),
		sched:   newScheduledMetrics(),
		pos:     newPOSMetrics(),
		backlog: &backlog{db: db, logger: logger, timeout: backlogTimeout, doubleTap: doubleTap},
	}
	// Outcomes known in advance start at 0, so that rate() and increase() see their first
	// event and the alert rules' series exist before anything happened.
	for _, o := range []string{"succeeded", "retry", "dead", "skipped", "error"} {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range []string{"swept", "failed"} {
		m.sweeps.WithLabelValues(r)
	}
	for _, a := range []string{"keys_tombstoned", "keys_deleted", "tombstones_forgotten", "events_deleted"} {
		m.swept.WithLabelValues(a)
	}
	for _, o := range []string{"completed", "failed", "cancelled", "snoozed"} {
		m.jobs.WithLabelValues("outbox_dispatch", o) // the job every process works
	}
	r.MustRegister(m.requests, m.idempotency, m.provider, m.sweeps, m.swept, m.jobs, m.deliveries, m.disabled,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(db.DB, "tekrar"),
		m.backlog,
	)
	r.MustRegister(m.sched.collectors()...)
	r.MustRegister(m.pos.collectors()...)
	m.receiptsRefused = newReceiptsRefused()
	r.MustRegister(m.receiptsRefused)
	return m
}

// Handler serves the registry in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry, Timeout: 10 * time.Second})
}

// Mux answers /metrics and nothing else: the metrics listener serves no API and no console.
func (m *Metrics) Mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return mux
}

// Listen serves Mux on addr until stop is called. It binds before it returns, so that an
// address in use fails the start of the process rather than a later scrape.
func (m *Metrics) Listen(addr string, logger *slog.Logger) (bound net.Addr, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: m.Mux(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener stopped", "err", err)
		}
	}()
	return ln.Addr(), func() { _ = srv.Close() }, nil
}
