package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivertype"
)

// Rescuer takes over the jobs of a dead process within RescueAfter and a quarter of it.
// River rescues them too, but only from its elected leader and every 30 seconds, a period
// River does not let a client set: a killed process's jobs waited RescueAfter, up to 30 s
// more for the rescuer's next pass (and a new election when the dead process led), then
// River's retry backoff and its scheduler's 5-second pass (measured: up to 69 s to drain
// after kills with a one-minute RescueAfter). Every process runs this one every
// RescueAfter/4, and a job it rescues is available at once, fetched at the next poll.
//
// A job has been running for longer than RescueAfter only if its process died or froze: its
// timeout is half of it (NewClient). The statements are River's own (its driver's
// JobGetStuck and JobRescueMany), which change a job only while it is still running since
// before the horizon, so that processes rescuing at once, River's leader among them, rescue
// each job once.
type Rescuer struct {
	exec   riverdriver.Executor
	after  time.Duration
	logger *slog.Logger
}

// rescueBatch is how many stuck jobs one statement rescues.
const rescueBatch = 1000

// NewRescuer returns the rescuer of jobs running for longer than after (Config.RescueAfter;
// 0: an hour, as NewClient).
func NewRescuer(db *sql.DB, after time.Duration, logger *slog.Logger) *Rescuer {
	if after <= 0 {
		after = time.Hour
	}
	return &Rescuer{exec: riverdatabasesql.New(db).GetExecutor(), after: after, logger: logger}
}

// Interval is how often Run rescues: a quarter of RescueAfter, so that a dead process's job
// runs again elsewhere at most RescueAfter and a quarter after it started, and the poll.
func (r *Rescuer) Interval() time.Duration { return r.after / 4 }

// Run rescues every Interval until ctx ends.
func (r *Rescuer) Run(ctx context.Context) {
	tick := time.NewTicker(r.Interval())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := r.Rescue(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.logger.Error("rescue stuck jobs", "err", err)
		case n > 0:
			r.logger.Info("rescued jobs of a dead process", "jobs", n, "running_for_more_than", r.after)
		}
	}
}

// Rescue makes every job running for longer than RescueAfter available again now (or
// discarded, when it has no attempt left; cancelled, when it was being cancelled), as
// River's rescuer does, and returns how many it rescued.
func (r *Rescuer) Rescue(ctx context.Context) (int, error) {
	horizon := time.Now().Add(-r.after)
	var after int64
	rescued := 0
	for {
		stuck, err := r.exec.JobGetStuck(ctx, &riverdriver.JobGetStuckParams{AfterID: after, Max: rescueBatch, StuckHorizon: horizon})
		if err != nil {
			return rescued, fmt.Errorf("rescue: stuck jobs: %w", err)
		}
		if len(stuck) == 0 {
			return rescued, nil
		}
		now := time.Now().UTC()
		p := &riverdriver.JobRescueManyParams{StuckHorizon: horizon}
		for _, job := range stuck {
			after = job.ID
			var meta struct {
				CancelAttemptedAt time.Time `json:"cancel_attempted_at"`
			}
			_ = json.Unmarshal(job.Metadata, &meta) // River's own metadata; unreadable: not being cancelled
			errData, err := json.Marshal(rivertype.AttemptError{At: now, Attempt: max(job.Attempt, 0),
				Error: fmt.Sprintf("running for more than %s: rescued as lost with its process", r.after)})
			if err != nil {
				return rescued, fmt.Errorf("rescue job %d: %w", job.ID, err)
			}
			state, finalized := rivertype.JobStateAvailable, (*time.Time)(nil)
			switch {
			case !meta.CancelAttemptedAt.IsZero():
				state, finalized = rivertype.JobStateCancelled, &now
			case job.Attempt >= job.MaxAttempts:
				state, finalized = rivertype.JobStateDiscarded, &now
			}
			p.ID = append(p.ID, job.ID)
			p.Error = append(p.Error, errData)
			p.FinalizedAt = append(p.FinalizedAt, finalized)
			p.ScheduledAt = append(p.ScheduledAt, now)
			p.State = append(p.State, string(state))
		}
		if _, err := r.exec.JobRescueMany(ctx, p); err != nil {
			return rescued, fmt.Errorf("rescue %d stuck jobs: %w", len(p.ID), err)
		}
		rescued += len(p.ID)
		if len(stuck) < rescueBatch {
			return rescued, nil
		}
	}
}
