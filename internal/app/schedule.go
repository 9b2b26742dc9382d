package app

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/installments"
	"github.com/tekrar/tekrar/checkout/reconcile"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/checkout/sweeper"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/schedule"
)

// tasks lists what the deployment does on a schedule, one process per tick
// (docs/scheduled.md). A part of tekrar with periodic work adds its schedule.Task here.
func tasks(cfg config.Server, charger *installments.Charger, sw *sweeper.Sweeper, settler *settlement.Settler, rc *reconcile.Reconciler) []schedule.Task {
	ts := []schedule.Task{SweepTask(cfg, sw),
		InstallmentsTask(charger),
		// A business day is settled once it has ended in its client's zone, and a grace after
		// (docs/settlement.md).
		{Name: "settle", Every: SettleEvery, Run: settler.SettleDue},
	}
	if cfg.ReconcileEvery > 0 {
		ts = append(ts, schedule.Task{Name: "reconcile", Every: cfg.ReconcileEvery,
			Run: func(ctx context.Context, now time.Time) (string, error) {
				res, err := rc.Run(ctx, now.Add(-cfg.ReconcileWindow), now)
				return res.String(), err
			}})
	}
	return ts
}

// The periods of the scheduled money work. Both are natural-keyed, so a shorter period only
// costs queries: these keep a due installment or a closed day waiting minutes, not hours.
const (
	InstallmentsEvery = 5 * time.Minute
	SettleEvery       = 15 * time.Minute
)

// InstallmentsTask is the installment charger as a task: installments fall due when a day
// begins in their client's zone, and a pass with nothing due is one indexed query
// (docs/installments.md). `tekrar installments run` runs the same task by hand.
func InstallmentsTask(charger *installments.Charger) schedule.Task {
	return schedule.Task{Name: "installments", Every: InstallmentsEvery, Run: func(ctx context.Context, now time.Time) (string, error) {
		res, err := charger.Run(ctx, now)
		return res.String(), err
	}}
}

// SweepTask is the key sweeper as a task: every TEKRAR_SWEEP_INTERVAL, a pass as of the
// tick. `tekrar sweep` runs the same task by hand.
func SweepTask(cfg config.Server, sw *sweeper.Sweeper) schedule.Task {
	return schedule.Task{Name: "sweep", Every: cfg.SweepInterval,
		Run: func(ctx context.Context, now time.Time) (string, error) {
			res, err := sw.PassAt(ctx, now)
			return res.String(), err
		}}
}

// scheduleConsumer runs the scheduler's ticks on River: its periodic jobs (inserted by the
// leader), its worker and its queue.
func scheduleConsumer(s *schedule.Scheduler) Consumer {
	return Consumer{
		AddWorkers: s.AddWorkers,
		Queues:     map[string]river.QueueConfig{schedule.Queue: s.QueueConfig()},
		Periodic:   s.PeriodicJobs(),
	}
}

// newScheduler builds the process's scheduler over the deployment's tasks; observe is told
// of every run it finishes (metrics).
func newScheduler(cfg config.Server, db *sql.DB, charger *installments.Charger, sw *sweeper.Sweeper, settler *settlement.Settler, rc *reconcile.Reconciler,
	now func() time.Time, logger *slog.Logger, observe func(schedule.Run, time.Duration)) (*schedule.Scheduler, error) {
	return schedule.New(db, schedule.Config{Now: now, Logger: logger.With("component", "schedule"), Observe: observe},
		tasks(cfg, charger, sw, settler, rc)...)
}

// taskNames are the names of s's tasks.
func taskNames(s *schedule.Scheduler) []string {
	var names []string
	for _, t := range s.Tasks() {
		names = append(names, t.Name)
	}
	return names
}
