package schedule

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Outcomes of a finished run. A run with no outcome has not finished: it is still going,
// or its process died during it.
const (
	OutcomeOK      = "ok"
	OutcomeFailed  = "failed"
	OutcomeSkipped = "skipped" // the task's previous run still held its lock; nothing was done
)

// Triggers of a run.
const (
	TriggerSchedule = "schedule" // a tick's job, inserted by River's leader
	TriggerHand     = "hand"     // RunNow: a command run by an operator
)

// run does one execution of t for the tick at: it takes the task's lock (unless unlocked),
// records the run, calls t.Run and records how it ended. The lock is a session advisory
// lock on a connection of its own, so a process that dies during a run releases it with
// its session; its run record stays unfinished.
func (s *Scheduler) run(ctx context.Context, t Task, at time.Time, jobID *int64, attempt int, unlocked bool) (Run, error) {
	r := Run{Task: t.Name, ScheduledFor: at, Process: s.process, Attempt: attempt, Trigger: TriggerSchedule}
	if jobID == nil {
		r.Trigger = TriggerHand
	} else {
		r.JobID = sql.NullInt64{Int64: *jobID, Valid: true}
	}
	if !unlocked {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return r, fmt.Errorf("schedule %s: %w", t.Name, err)
		}
		defer conn.Close()
		var got bool
		if err := conn.QueryRowContext(ctx, tryLockSQL, t.Name).Scan(&got); err != nil {
			return r, fmt.Errorf("schedule %s: lock: %w", t.Name, err)
		}
		if !got {
			r.Summary = "the task's previous run is still going"
			r.Outcome = sql.NullString{String: OutcomeSkipped, Valid: true}
			if err := s.record(ctx, &r); err != nil {
				return r, err
			}
			s.observed(r, 0)
			return r, nil
		}
		defer func() {
			// On a broken connection the session, and with it the lock, is gone anyway.
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), unlockSQL, t.Name)
		}()
	}
	if err := s.record(ctx, &r); err != nil {
		return r, err
	}
	start := time.Now()
	summary, runErr := call(ctx, t, at)
	took := time.Since(start)
	r.Summary = summary
	r.Outcome = sql.NullString{String: OutcomeOK, Valid: true}
	if runErr != nil {
		r.Outcome.String = OutcomeFailed
		r.Error = sql.NullString{String: runErr.Error(), Valid: true}
		runErr = fmt.Errorf("schedule %s at %s: %w", t.Name, at.Format(time.RFC3339), runErr)
	}
	err := finishRun(context.WithoutCancel(ctx), s.db, &r)
	s.observed(r, took) // counted even when its end could not be recorded: it did its work
	if err != nil {
		return r, errors.Join(runErr, fmt.Errorf("schedule %s: record the run's end: %w", t.Name, err))
	}
	return r, runErr
}

// observed tells Config.Observe of a finished run.
func (s *Scheduler) observed(r Run, took time.Duration) {
	if s.observe != nil {
		s.observe(r, took)
	}
}

// record inserts r's row (finished already if r has an outcome) and prunes the task's
// records past the newest Keep, in one statement.
func (s *Scheduler) record(ctx context.Context, r *Run) error {
	if err := insertRun(ctx, s.db, r, s.keep); err != nil {
		return fmt.Errorf("schedule %s: record the run: %w", r.Task, err)
	}
	return nil
}

// call runs t, turning a panic into the run's error: a panicking task must not leave a
// record that looks like its process died.
func call(ctx context.Context, t Task, at time.Time) (summary string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return t.Run(ctx, at)
}

// RunNow runs the named task once, by hand, for the time now: under the task's lock (it is
// skipped if a scheduled run is going) and with a run record, as a tick would be.
func (s *Scheduler) RunNow(ctx context.Context, name string) (Run, error) {
	t, ok := s.byName[name]
	if !ok {
		return Run{}, fmt.Errorf("%w: %q", ErrNoTask, name)
	}
	return s.run(ctx, t, s.now().UTC(), nil, 1, false)
}

// RunByHand runs the named task once, by hand, for the time at, with a run record as a
// tick's, but without the task's lock: for a task whose runs may overlap (installments:
// every installment is leased on its own, docs/installments.md), so that its command does
// what it was asked even while a scheduled run is going, and still shows on the console's
// Schedule page beside the scheduled runs.
func (s *Scheduler) RunByHand(ctx context.Context, name string, at time.Time) (Run, error) {
	t, ok := s.byName[name]
	if !ok {
		return Run{}, fmt.Errorf("%w: %q", ErrNoTask, name)
	}
	return s.run(ctx, t, at.UTC(), nil, 1, true)
}
