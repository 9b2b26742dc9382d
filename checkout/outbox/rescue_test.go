package outbox_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// probeArgs is a job of the test's own queue: the rescuer takes over River's jobs of every
// queue (webhook deliveries, receipts), the outbox's dispatch not among them.
type probeArgs struct{}

func (probeArgs) Kind() string { return "rescue_probe" }

func (probeArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: "probe"} }

type probeWorker struct {
	river.WorkerDefaults[probeArgs]
	runs atomic.Int64
}

func (w *probeWorker) Work(context.Context, *river.Job[probeArgs]) error { w.runs.Add(1); return nil }

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
	const after, poll = 2 * time.Second, 100 * time.Millisecond
	w := &probeWorker{}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	rc, err := outbox.NewClient(d.DB, workers, outbox.Config{PollInterval: poll, RescueAfter: after,
		Queues: map[string]river.QueueConfig{"probe": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rc.Insert(ctx, probeArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecContext(ctx, `
		UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY['killed-process']
		 WHERE id = $1`, res.Job.ID); err != nil {
		t.Fatalf("leave the job running: %v", err)
	}
	started := time.Now()
	completed, stopSub := rc.Subscribe(river.EventKindJobCompleted)
	defer stopSub()
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background()) //nolint:errcheck // the test is over
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
	if w.runs.Load() != 1 {
		t.Errorf("the job ran %d times, want 1", w.runs.Load())
	}
}
