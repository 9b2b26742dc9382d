package schedule

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// start runs s's ticks on a River client of its own until the test ends, as serve does.
func start(t *testing.T, db *sql.DB, s *Scheduler) *outbox.Client {
	t.Helper()
	w := river.NewWorkers()
	s.AddWorkers(w)
	c, err := outbox.NewClient(db, w, outbox.Config{PollInterval: 50 * time.Millisecond,
		Queues: map[string]river.QueueConfig{Queue: s.QueueConfig()}, PeriodicJobs: s.PeriodicJobs()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.StopAndCancel(ctx)
	})
	return c
}

func runs(t *testing.T, db *sql.DB, task string) []Run {
	t.Helper()
	rows, err := db.Query(`SELECT `+runColumns+` FROM schedule_runs WHERE task = $1 ORDER BY id`, task)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := scanRuns(rows)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestTaskGetsTheScheduledTime: a tick's Run is given the tick's time, read from the
// scheduler's clock when the leader inserted it, not the wall clock when it runs; the run
// record says the same. The clock here stands still in 2031, so every tick after the
// first is the same tick and is not inserted again.
func TestTaskGetsTheScheduledTime(t *testing.T) {
	db := dbtest.New(t).DB
	clock := time.Date(2031, 5, 6, 7, 8, 9, 700_000_000, time.UTC)
	got := make(chan time.Time, 10)
	s, err := New(db, Config{Now: func() time.Time { return clock }}, Task{Name: "probe", Every: time.Second,
		Run: func(_ context.Context, now time.Time) (string, error) { got <- now; return "probed", nil }})
	if err != nil {
		t.Fatal(err)
	}
	start(t, db, s)
	want := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	select {
	case now := <-got:
		if !now.Equal(want) {
			t.Fatalf("the task was given %s, want the tick %s", now, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no tick ran")
	}
	waitFor(t, "the run to be recorded finished", func() bool {
		rs := runs(t, db, "probe")
		return len(rs) == 1 && rs[0].FinishedAt.Valid
	})
	r := runs(t, db, "probe")[0]
	if !r.ScheduledFor.Equal(want) || r.Outcome.String != OutcomeOK || r.Summary != "probed" ||
		r.Trigger != TriggerSchedule || !r.JobID.Valid || r.Process != Process() || r.Attempt != 1 {
		t.Errorf("run record %+v", r)
	}
}

// TestATickIsInsertedOnce: two leaders (a new one, and an old one woken from a freeze)
// insert the same tick at once; one job exists, and a failed tick is not inserted again.
func TestATickIsInsertedOnce(t *testing.T) {
	db := dbtest.New(t).DB
	task := Task{Name: "once", Every: time.Minute, Run: func(context.Context, time.Time) (string, error) { return "", nil }}
	at := Tick(time.Now(), task.Every)
	s, err := New(db, Config{}, task)
	if err != nil {
		t.Fatal(err)
	}
	var clients []*outbox.Client
	for range 2 {
		w := river.NewWorkers()
		s.AddWorkers(w)
		c, err := outbox.NewClient(db, w, outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for range 5 {
				if _, err := c.Insert(context.Background(), Args{Task: task.Name, At: at}, task.insertOpts()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	count := func() (n int) {
		if err := db.QueryRow(`SELECT count(*) FROM river_job WHERE kind = $1`, Kind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 1 {
		t.Fatalf("%d jobs of one tick, want 1", n)
	}
	if _, err := db.Exec(`UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE kind = $1`, Kind); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[0].Insert(context.Background(), Args{Task: task.Name, At: at}, task.insertOpts()); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("a discarded tick was inserted again: %d jobs", n)
	}
	next := at.Add(task.Every)
	if _, err := clients[0].Insert(context.Background(), Args{Task: task.Name, At: next}, task.insertOpts()); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("the next tick: %d jobs, want 2", n)
	}
}

// TestRunsOfATaskDoNotOverlap: while a run of the task holds its lock (another process's,
// here a session of the test's), a tick is recorded as skipped and its Run is not called.
func TestRunsOfATaskDoNotOverlap(t *testing.T) {
	db := dbtest.New(t).DB
	calls := 0
	var observed []string
	observe := func(r Run, took time.Duration) {
		skippedTookNothing := r.Outcome.String != OutcomeSkipped || took == 0
		observed = append(observed, fmt.Sprint(r.Outcome.String, " ", r.FinishedAt.Valid, " ", skippedTookNothing))
	}
	s, err := New(db, Config{Observe: observe}, Task{Name: "alone", Every: time.Minute,
		Run: func(context.Context, time.Time) (string, error) { calls++; return "did it", nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, `SELECT pg_advisory_lock($1, hashtext('alone'))`, lockClass); err != nil {
		t.Fatal(err)
	}
	r, err := s.RunNow(ctx, "alone")
	if err != nil || r.Outcome.String != OutcomeSkipped || calls != 0 {
		t.Fatalf("with the lock held elsewhere: %+v %v, %d calls; want skipped, none", r, err, calls)
	}
	if _, err := other.ExecContext(ctx, `SELECT pg_advisory_unlock($1, hashtext('alone'))`, lockClass); err != nil {
		t.Fatal(err)
	}
	r, err = s.RunNow(ctx, "alone")
	if err != nil || r.Outcome.String != OutcomeOK || calls != 1 {
		t.Fatalf("its turn: %+v %v, %d calls", r, err, calls)
	}
	rs := runs(t, db, "alone")
	if len(rs) != 2 || rs[0].Outcome.String != OutcomeSkipped || !rs[0].FinishedAt.Valid ||
		rs[1].Summary != "did it" || rs[1].Trigger != TriggerHand || rs[1].JobID.Valid {
		t.Errorf("run records %+v", rs)
	}
	if got := strings.Join(observed, ", "); got != "skipped true true, ok true true" {
		t.Errorf("observed %s, want the skipped run (taking no time) and the ok one, both recorded finished", got)
	}
}

// TestRunRecords: failures and panics are recorded as failed with their error, and only the
// newest Keep records of a task are kept. Observe is told of every run as recorded.
func TestRunRecords(t *testing.T) {
	db := dbtest.New(t).DB
	var n int
	var observed []string
	observe := func(r Run, _ time.Duration) { observed = append(observed, r.Task+":"+r.Outcome.String) }
	s, err := New(db, Config{Keep: 3, Observe: observe},
		Task{Name: "counted", Every: time.Minute, Run: func(context.Context, time.Time) (string, error) {
			n++
			switch n {
			case 4:
				return "half", errors.New("provider down")
			case 5:
				panic("boom")
			}
			return "fine", nil
		}},
		Task{Name: "other", Every: time.Minute, Run: func(context.Context, time.Time) (string, error) { return "", nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.RunNow(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		_, err := s.RunNow(ctx, "counted")
		if (err != nil) != (i >= 4) {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	rs := runs(t, db, "counted")
	if len(rs) != 3 {
		t.Fatalf("%d records kept, want 3: %+v", len(rs), rs)
	}
	if rs[0].Summary != "fine" || rs[1].Error.String != "provider down" || rs[1].Summary != "half" ||
		rs[1].Outcome.String != OutcomeFailed || rs[2].Error.String != "panic: boom" || !rs[2].FinishedAt.Valid {
		t.Errorf("records %+v", rs)
	}
	if got := strings.Join(observed, " "); got != "other:ok counted:ok counted:ok counted:ok counted:failed counted:failed" {
		t.Errorf("observed %s", got)
	}
	if len(runs(t, db, "other")) != 1 {
		t.Error("pruning one task's records touched another's")
	}
	if _, err := s.RunNow(ctx, "nope"); !errors.Is(err, ErrNoTask) {
		t.Errorf("unknown task: %v", err)
	}
}

func TestTasksAreValidated(t *testing.T) {
	ok := func(context.Context, time.Time) (string, error) { return "", nil }
	for _, tc := range []struct {
		name  string
		tasks []Task
	}{
		{"bad name", []Task{{Name: "Sweep!", Every: time.Minute, Run: ok}}},
		{"too often", []Task{{Name: "fast", Every: 500 * time.Millisecond, Run: ok}}},
		{"no run", []Task{{Name: "idle", Every: time.Minute}}},
		{"twice", []Task{{Name: "a", Every: time.Minute, Run: ok}, {Name: "a", Every: time.Hour, Run: ok}}},
	} {
		if _, err := New(nil, Config{}, tc.tasks...); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestTick(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now   time.Time
		every time.Duration
		want  time.Time
	}{
		{base.Add(-90 * time.Millisecond), time.Minute, base}, // River calls up to 100 ms early
		{base.Add(59 * time.Second), time.Minute, base},
		{base.Add(25*time.Hour + time.Minute), 24 * time.Hour, base.Add(24 * time.Hour)},
		{base.Add(-time.Second), time.Minute, base.Add(-time.Minute)},
	} {
		if got := Tick(tc.now, tc.every); !got.Equal(tc.want) {
			t.Errorf("Tick(%s, %s) = %s, want %s", tc.now, tc.every, got, tc.want)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
