package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tekrar/tekrar/checkout/report"
)

// backlogTimeout bounds the backlog queries of one scrape: a slow database costs a scrape
// tekrar_backlog_up 0, never a stuck scraper or a pool drained by scrapes.
const backlogTimeout = 2 * time.Second

// backlogSQL reads, in one round trip, what is waiting in Postgres. Every process of a
// deployment reports the same values (alert on max()). Each count is over a partial index
// or a small table:
//   - outcome unknown: keys in progress whose lease lapsed (the completer's work; a client
//     was told payment_pending, or hung up), and the oldest one's age;
//   - attention: keys handed to an operator (needs_attention);
//   - the outbox: events not yet dispatched (outbox_queue), the oldest one's age (outbox lag), and
//     events the dispatcher gave up on (discarded);
//   - client webhook deliveries pending or dead, and endpoints disabled (not deleted; at most
//     20 a client);
//   - provider webhooks received more than once (duplicates the inbox absorbed);
//   - the last reconciliation run;
//   - per scheduled task (over schedule_runs' (task, id) index, at most a thousand rows a
//     task): when its newest ok run finished, and how long its newest run has gone
//     unfinished, as JSON {task: [last_ok, unfinished]}.
const backlogSQL = `
SELECT
  (SELECT count(*) FROM idempotency_keys
    WHERE state = 'in_progress' AND (lease_expires_at IS NULL OR lease_expires_at <= now())),
  (SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 FROM idempotency_keys
    WHERE state = 'in_progress' AND (lease_expires_at IS NULL OR lease_expires_at <= now())),
  (SELECT count(*) FROM idempotency_keys WHERE state = 'needs_attention'),
  (SELECT count(*) FROM outbox_queue WHERE discarded_at IS NULL),
  (SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(e.created_at)), 0)::float8
     FROM outbox_queue q JOIN outbox_events e ON e.id = q.event_id WHERE q.discarded_at IS NULL),
  (SELECT count(*) FROM outbox_queue WHERE discarded_at IS NOT NULL),
  (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'),
  (SELECT count(*) FROM webhook_deliveries WHERE state = 'dead'),
  (SELECT count(*) FROM webhook_endpoints WHERE disabled_at IS NOT NULL AND deleted_at IS NULL),
  (SELECT COALESCE(sum(deliveries - 1), 0) FROM provider_events),
  (SELECT COALESCE(EXTRACT(EPOCH FROM max(finished_at)), 0)::float8 FROM reconciliation_runs
    WHERE error IS NULL AND finished_at IS NOT NULL),
  (SELECT count(*) FROM (SELECT error FROM reconciliation_runs ORDER BY started_at DESC, id DESC LIMIT 1) last
    WHERE last.error IS NOT NULL),
  (SELECT COALESCE(json_object_agg(t.task, json_build_array(
      COALESCE((SELECT EXTRACT(EPOCH FROM finished_at)::float8 FROM schedule_runs
                 WHERE task = t.task AND outcome = 'ok' ORDER BY id DESC LIMIT 1), 0),
      COALESCE((SELECT EXTRACT(EPOCH FROM now() - started_at)::float8 FROM schedule_runs
                 WHERE task = t.task AND finished_at IS NULL
                   AND id = (SELECT max(id) FROM schedule_runs WHERE task = t.task)), 0))), '{}')::text
     FROM (SELECT DISTINCT task FROM schedule_runs) t)`

var (
	descUp = prometheus.NewDesc("tekrar_backlog_up",
		"1 when the backlog queries of this scrape succeeded within their timeout, else 0.", nil, nil)
	descUnknown = prometheus.NewDesc("tekrar_payments_outcome_unknown",
		"Keyed requests in progress whose lease lapsed: a payment whose outcome tekrar does not know yet (the completer resolves them).", nil, nil)
	descUnknownAge = prometheus.NewDesc("tekrar_payments_outcome_unknown_oldest_seconds",
		"Age of the oldest payment whose outcome is unknown; 0 when there is none.", nil, nil)
	descAttention = prometheus.NewDesc("tekrar_attention_backlog",
		"Idempotency keys handed to an operator (needs_attention), waiting in the console.", nil, nil)
	descOutboxPending = prometheus.NewDesc("tekrar_outbox_pending_events",
		"Outbox events whose dispatch has not finished.", nil, nil)
	descOutboxLag = prometheus.NewDesc("tekrar_outbox_lag_seconds",
		"Age of the oldest outbox event not yet dispatched; 0 when none waits.", nil, nil)
	descOutboxDiscarded = prometheus.NewDesc("tekrar_outbox_discarded_events",
		"Outbox events whose dispatch was given up on (discarded after their last attempt): their consumers never saw them.", nil, nil)
	descDeliveries = prometheus.NewDesc("tekrar_webhook_deliveries",
		"Client webhook deliveries by state (pending: still being retried; dead: given up after the horizon).", []string{"state"}, nil)
	descEndpointsDisabled = prometheus.NewDesc("tekrar_webhook_endpoints_disabled",
		"Client webhook endpoints disabled (and not deleted): they receive no events until their client resends a window or deletes them.", nil, nil)
	descInboxDup = prometheus.NewDesc("tekrar_inbox_duplicate_deliveries",
		"Provider webhook deliveries of an event already received (absorbed by the inbox), over the events kept.", nil, nil)
	descReconcileLast = prometheus.NewDesc("tekrar_reconcile_last_success_timestamp_seconds",
		"When the last successful reconciliation run finished (Unix seconds); 0 when none has.", nil, nil)
	descDoubleTaps = prometheus.NewDesc("tekrar_suspected_double_taps",
		"Pairs of paid orders of the last hour that look like one purchase charged twice under two keys (the console's suspected double taps); what idempotency keys cannot catch.", nil, nil)
	descReconcileFailed = prometheus.NewDesc("tekrar_reconcile_last_run_failed",
		"1 when the newest reconciliation run failed.", nil, nil)
	descTaskLastOK = prometheus.NewDesc("tekrar_scheduled_last_success_timestamp_seconds",
		"When the scheduled task's newest ok run finished, in any process or by hand (Unix seconds); 0 when none has.", []string{"task"}, nil)
	descTaskUnfinished = prometheus.NewDesc("tekrar_scheduled_unfinished_run_seconds",
		"How long the scheduled task's newest run has gone unfinished: a run still going, or one whose process died with no run since; 0 when the newest run finished.", []string{"task"}, nil)
)

// backlog is a Collector that reads the backlogs from Postgres at scrape time.
type backlog struct {
	db        *sqlx.DB
	logger    *slog.Logger
	timeout   time.Duration
	doubleTap time.Duration // the console's double-tap window

	mu    sync.Mutex
	tasks []string // the scheduled tasks this process registers (setTasks)
}

// setTasks names the scheduled tasks whose runs the scrape reports: those registered by
// code, a bounded set, and not whatever names older versions left in schedule_runs.
func (b *backlog) setTasks(names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tasks = append([]string(nil), names...)
}

// doubleTapHour is how far back tekrar_suspected_double_taps looks.
const doubleTapHour = time.Hour

func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descUnknown, descUnknownAge, descAttention, descOutboxPending,
		descOutboxLag, descOutboxDiscarded, descDeliveries, descEndpointsDisabled, descInboxDup, descReconcileLast, descReconcileFailed, descDoubleTaps,
		descTaskLastOK, descTaskUnfinished} {
		ch <- d
	}
}

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	var v struct {
		unknown, attention, outboxPending, discarded, pending, dead, disabled, dup, failed int64
		unknownAge, outboxLag, reconciled                                                  float64
		tasks                                                                              string
	}
	err := b.db.QueryRowContext(ctx, backlogSQL).Scan(&v.unknown, &v.unknownAge, &v.attention, &v.outboxPending,
		&v.outboxLag, &v.discarded, &v.pending, &v.dead, &v.disabled, &v.dup, &v.reconciled, &v.failed, &v.tasks)
	var runs map[string][2]float64 // task → [last ok, unfinished]
	if err == nil {
		err = json.Unmarshal([]byte(v.tasks), &runs)
	}
	if err != nil {
		b.logger.Warn("metrics: backlog queries failed", "err", fmt.Errorf("read backlogs: %w", err))
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	gauge := func(d *prometheus.Desc, x float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x, labels...)
	}
	gauge(descUp, 1)
	gauge(descUnknown, float64(v.unknown))
	gauge(descUnknownAge, v.unknownAge)
	gauge(descAttention, float64(v.attention))
	gauge(descOutboxPending, float64(v.outboxPending))
	gauge(descOutboxLag, v.outboxLag)
	gauge(descOutboxDiscarded, float64(v.discarded))
	gauge(descDeliveries, float64(v.pending), "pending")
	gauge(descDeliveries, float64(v.dead), "dead")
	gauge(descEndpointsDisabled, float64(v.disabled))
	gauge(descInboxDup, float64(v.dup))
	gauge(descReconcileLast, v.reconciled)
	gauge(descReconcileFailed, float64(v.failed))
	b.mu.Lock()
	tasks := b.tasks
	b.mu.Unlock()
	for _, t := range tasks {
		gauge(descTaskLastOK, runs[t][0], t)
		gauge(descTaskUnfinished, runs[t][1], t)
	}
	now := time.Now()
	taps, err := report.SuspectedDoubleTaps(ctx, b.db, report.OrderFilter{From: now.Add(-doubleTapHour), To: now}, b.doubleTap)
	if err != nil {
		b.logger.Warn("metrics: double-tap query failed", "err", err)
		return // the gauge is absent: an alert on it does not fire on a failed query
	}
	gauge(descDoubleTaps, float64(len(taps)))
}
