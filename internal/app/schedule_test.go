package app_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/schedule"
)

// The deployment's tasks: the sweeper, installments and settlement always, reconciliation
// unless TEKRAR_RECONCILE_EVERY is 0. Reconciliation as a task is recorded as scheduled, over the window that ends at the
// tick it was given.
func TestScheduledTasks(t *testing.T) {
	names := func(e *apptest.Env) (ns []string) {
		for _, task := range e.App.Scheduler.Tasks() {
			ns = append(ns, task.Name)
		}
		return ns
	}
	if got := names(apptest.New(t, func(c *config.Server) { c.ReconcileEvery = 0 })); !slices.Equal(got, []string{"sweep", "installments", "settle"}) {
		t.Errorf("with reconciliation off: tasks %v", got)
	}
	e := apptest.New(t, func(c *config.Server) { c.ReconcileEvery = time.Hour; c.ReconcileWindow = 2 * time.Hour })
	if got := names(e); !slices.Equal(got, []string{"sweep", "installments", "settle", "reconcile"}) {
		t.Fatalf("tasks %v", got)
	}
	for _, name := range []string{"installments", "settle"} {
		if r, err := e.App.Scheduler.RunNow(context.Background(), name); err != nil || r.Outcome.String != schedule.OutcomeOK {
			t.Fatalf("%s: %+v %v", name, r, err)
		}
	}
	now := e.Clock.Stop()
	r, err := e.App.Scheduler.RunNow(context.Background(), "reconcile")
	if err != nil || r.Outcome.String != schedule.OutcomeOK {
		t.Fatalf("reconcile: %+v %v", r, err)
	}
	var run struct {
		Scheduled bool      `db:"scheduled"`
		Start     time.Time `db:"window_start"`
		End       time.Time `db:"window_end"`
	}
	if err := e.DB.Get(&run, `SELECT scheduled, window_start, window_end FROM reconciliation_runs`); err != nil {
		t.Fatal(err)
	}
	if !run.Scheduled || !run.End.Equal(now.Truncate(time.Microsecond)) || run.End.Sub(run.Start) != 2*time.Hour {
		t.Errorf("reconciliation run %+v, want scheduled over the 2h before %s", run, now)
	}
}
