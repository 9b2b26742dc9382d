package outbox_test

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// A job left running by a process that died runs again in another process within
// RescueAfter and a quarter of it, and the poll: the Rescuer's bound. The job is left as a
// killed process leaves it (running, attempted by a process that is gone); the process that
// takes it is a River client started just after, alone and so River's leader, whose own
// rescuer finds nothing stuck on its first pass and would look again only 30 seconds later.
func TestADeadProcessJobRunsAgainWithinTheRescueBound(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := d.ExecContext(ctx, effectsSQL); err != nil {
		t.Fatal(err)
	}
	ev, err := outbox.Insert(ctx, d.DB, newClientRow(t, d.DB), outbox.RefundCreated, sql.NullInt64{}, map[string]any{"refund": "rf_x"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.ExecContext(ctx, `
		UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY['killed-process']
		 WHERE kind = $1 AND args->>'event_id' = $2`, outbox.KindDispatch, ev.ID)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("leave the job running: %d rows, %v", n, err)
	}
	started := time.Now()

	const after, poll = 2 * time.Second, 100 * time.Millisecond
	h := &countingHandler{}
	workers := river.NewWorkers()
	outbox.AddWorkers(workers, d.DB, h)
	rc, err := outbox.NewClient(d.DB, workers, outbox.Config{Workers: 2, PollInterval: poll, RescueAfter: after})
	if err != nil {
		t.Fatal(err)
	}
	completed, stopSub := rc.Subscribe(river.EventKindJobCompleted)
	defer stopSub()
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background())
	rescuer := outbox.NewRescuer(d.DB, after, slog.New(slog.DiscardHandler))
	rescuing, stopRescuing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); rescuer.Run(rescuing) }()
	defer wg.Wait()
	defer stopRescuing()

	select {
	case <-completed:
	case <-ctx.Done():
		t.Fatalf("the dead process's job did not run again in %s", time.Since(started))
	}
	took := time.Since(started)
	// The bound, with a second's room for a loaded machine; River alone took 30 s and more.
	bound := after + rescuer.Interval() + poll + time.Second
	t.Logf("the dead process's job ran again %s after it started (RescueAfter %s, bound %s)", took, after, bound)
	if took < after || took > bound {
		t.Errorf("the job ran again after %s; want between RescueAfter %s and %s", took, after, bound)
	}
	if h.calls.Load() != 1 {
		t.Errorf("the handler was called %d times, want 1", h.calls.Load())
	}
}
