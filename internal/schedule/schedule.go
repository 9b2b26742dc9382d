// Package schedule runs tekrar's periodic work (sweeping expired keys, reconciliation, and
// whatever else registers a Task) on River, the job queue tekrar already runs for its outbox.
//
// River's elected leader inserts one job per task per tick; the job is unique by (task,
// tick), so a second leader, a leader frozen past its lease and woken again, or a restart
// never inserts a tick that was inserted already, and River's locked fetch hands each job to
// one process. A task's runs do not overlap: a tick that finds the task's previous run still
// going is recorded as skipped. Every execution writes a run record (schedule_runs): when it
// was scheduled for, which process ran it, when it started and finished, and what it did.
// docs/scheduled.md has the whole story.
package schedule

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Task is work done every Every, by one process of the deployment at a time.
type Task struct {
	// Name identifies the task in run records and the console: lower case letters, digits
	// and '_', at most 40 characters. It is part of each tick's unique key: renaming a task
	// starts its record afresh.
	Name string
	// Every is the task's period, at least a second. Ticks fall on multiples of Every since
	// the zero time: every hour on the hour, every day at 00:00 UTC.
	Every time.Duration
	// Run does the work of the tick scheduled for now. It is given the tick's time, not
	// the clock's: a tick run late, or in a test, works on the time it was scheduled for.
	// summary says what it did, for the run record; an error is recorded and logged, and
	// the next tick runs as usual.
	Run func(ctx context.Context, now time.Time) (summary string, err error)
	// MaxAttempts is how many times a tick is tried; 0 means once. A tick whose run failed
	// or whose process died is not retried by default: the next tick does its work. A task
	// with a long period (a nightly job) may want a few; River retries with its backoff,
	// and a retried tick is a new run record with the same scheduled time.
	MaxAttempts int
}

var taskName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

func (t Task) validate() error {
	switch {
	case !taskName.MatchString(t.Name):
		return fmt.Errorf("task %q: a name is lower case letters, digits and '_', at most 40 characters", t.Name)
	case t.Every < time.Second:
		return fmt.Errorf("task %s: every %s is less than a second", t.Name, t.Every)
	case t.Run == nil:
		return fmt.Errorf("task %s: no Run", t.Name)
	case t.MaxAttempts < 0:
		return fmt.Errorf("task %s: negative MaxAttempts", t.Name)
	}
	return nil
}

// Queue is the River queue the tasks' jobs run on.
const Queue = "schedule"

// Kind is the River kind of a tick's job.
const Kind = "scheduled_task"

// Args is one tick of one task: River's job arguments, and its unique key.
type Args struct {
	Task string    `json:"task"`
	At   time.Time `json:"at"`
}

// Kind is River's name for the job.
func (Args) Kind() string { return Kind }

// tickStates are the job states in which a tick's job, once inserted, keeps a second one of
// the same tick out: all of them, so that a tick that failed or was cancelled is not
// inserted again either. River deletes finished jobs after a day (a week if discarded);
// the clock has long moved past their ticks by then.
var tickStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
	rivertype.JobStateDiscarded, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// insertOpts puts a tick on the schedule queue, unique by its arguments (task and tick).
// The job is available at once: its tick is in its arguments.
func (t Task) insertOpts() *river.InsertOpts {
	return &river.InsertOpts{
		Queue:       Queue,
		MaxAttempts: max(t.MaxAttempts, 1),
		UniqueOpts:  river.UniqueOpts{ByArgs: true, ByState: tickStates},
	}
}

// Tick is the tick of period every that now falls in, looking margin ahead: River's
// leader calls a periodic job's constructor up to 100 ms before the time it was due.
func Tick(now time.Time, every time.Duration) time.Time {
	return now.Add(tickMargin).Truncate(every).UTC()
}

// tickMargin is more than River's 100 ms and far less than a second, the shortest period.
const tickMargin = 250 * time.Millisecond

// aligned is a River schedule whose times are the multiples of every.
type aligned time.Duration

func (a aligned) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(a)).Add(time.Duration(a))
}

// Scheduler holds the registered tasks and runs their ticks.
type Scheduler struct {
	db      *sql.DB
	tasks   []Task
	byName  map[string]Task
	now     func() time.Time
	logger  *slog.Logger
	process string
	keep    int
	observe func(Run, time.Duration)
}

// Config is how a Scheduler runs.
type Config struct {
	// Now is the clock the leader reads a tick's time from; nil is time.Now.
	Now func() time.Time
	// Keep is how many run records of each task are kept; 0 means DefaultKeep.
	Keep   int
	Logger *slog.Logger
	// Observe, when not nil, is told every run this process finished (ok, failed or
	// skipped) and how long the task's Run took (0 for a skipped run): metrics. It is
	// called after the run's record was written, on the run's goroutine; it must be quick.
	Observe func(r Run, took time.Duration)
}

// DefaultKeep is how many run records of each task are kept by default.
const DefaultKeep = 1000

// New returns a scheduler of tasks over db. Names must be unique.
func New(db *sql.DB, cfg Config, tasks ...Task) (*Scheduler, error) {
	s := &Scheduler{db: db, tasks: tasks, byName: map[string]Task{}, now: cfg.Now, logger: cfg.Logger,
		process: Process(), keep: cfg.Keep, observe: cfg.Observe}
	if s.now == nil {
		s.now = time.Now
	}
	if s.keep <= 0 {
		s.keep = DefaultKeep
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	for _, t := range tasks {
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("schedule: %w", err)
		}
		if _, dup := s.byName[t.Name]; dup {
			return nil, fmt.Errorf("schedule: two tasks are named %s", t.Name)
		}
		s.byName[t.Name] = t
	}
	return s, nil
}

// Tasks lists the registered tasks in the order given.
func (s *Scheduler) Tasks() []Task { return s.tasks }

// PeriodicJobs are River's periodic jobs of the tasks, for river.Config. Only River's
// leader runs them: each inserts the job of its task's tick.
func (s *Scheduler) PeriodicJobs() []*river.PeriodicJob {
	jobs := make([]*river.PeriodicJob, 0, len(s.tasks))
	for _, t := range s.tasks {
		jobs = append(jobs, river.NewPeriodicJob(aligned(t.Every), func() (river.JobArgs, *river.InsertOpts) {
			at := Tick(s.now(), t.Every)
			return Args{Task: t.Name, At: at}, t.insertOpts()
		}, &river.PeriodicJobOpts{ID: t.Name}))
	}
	return jobs
}

// AddWorkers registers the worker that runs ticks.
func (s *Scheduler) AddWorkers(w *river.Workers) { river.AddWorker(w, &worker{s: s}) }

// QueueConfig is the schedule queue's: a worker per task, so that a long task does not
// hold up another.
func (s *Scheduler) QueueConfig() river.QueueConfig {
	return river.QueueConfig{MaxWorkers: max(len(s.tasks), 1)}
}

type worker struct {
	river.WorkerDefaults[Args]
	s *Scheduler
}

// Timeout: none. A task bounds its own work (its batches, its provider calls); River would
// otherwise cancel a long sweep of a backlog half way.
func (w *worker) Timeout(*river.Job[Args]) time.Duration { return -1 }

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	t, ok := w.s.byName[job.Args.Task]
	if !ok {
		// A task of another version of tekrar, or one no longer registered.
		return river.JobCancel(fmt.Errorf("schedule: no task %q in this process", job.Args.Task))
	}
	r, err := w.s.run(ctx, t, job.Args.At, &job.ID, job.Attempt, false)
	switch {
	case err != nil:
		w.s.logger.Warn("scheduled task failed", "task", t.Name, "at", job.Args.At, "run_id", r.ID, "err", err)
	case r.Outcome.String == OutcomeSkipped:
		w.s.logger.Info("scheduled task skipped", "task", t.Name, "at", job.Args.At, "reason", r.Summary)
	default:
		w.s.logger.Debug("scheduled task", "task", t.Name, "at", job.Args.At, "run_id", r.ID, "summary", r.Summary)
	}
	return err
}

// Process names this process in run records: host:pid, as reconciliation names its runs.
func Process() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// ErrNoTask is returned by RunNow for a name no task has.
var ErrNoTask = errors.New("schedule: no such task")
