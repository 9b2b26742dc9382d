package schedule

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The statements of the scheduler. It owns schedule_runs (migration 26).

// Run is a row of schedule_runs: one execution of a task.
type Run struct {
	ID           int64
	Task         string
	ScheduledFor time.Time
	Trigger      string
	JobID        sql.NullInt64 // River's job; none when run by hand
	Attempt      int
	Process      string
	StartedAt    time.Time
	FinishedAt   sql.NullTime   // none: still going, or its process died
	Outcome      sql.NullString // OutcomeOK, OutcomeFailed, OutcomeSkipped; none while unfinished
	Summary      string
	Error        sql.NullString
}

// lockClass is the first key of the tasks' advisory locks ("schd"); the second is a hash of
// the task's name.
const lockClass = 0x73636864

var (
	tryLockSQL = fmt.Sprintf(`SELECT pg_try_advisory_lock(%d, hashtext($1))`, lockClass)
	unlockSQL  = fmt.Sprintf(`SELECT pg_advisory_unlock(%d, hashtext($1))`, lockClass)
)

// startRunSQL records a run (finished at once when it has an outcome: a skipped turn) and,
// in the same statement, deletes the task's records older than the newest keep ($9). The
// DELETE sees the table as it was before the INSERT, hence keep-1.
const startRunSQL = `
	WITH run AS (
	    INSERT INTO schedule_runs (task, scheduled_for, trigger, job_id, attempt, process, finished_at, outcome, summary)
	    VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::text IS NULL THEN NULL ELSE clock_timestamp() END, $7, $8)
	    RETURNING id, started_at, finished_at
	), pruned AS (
	    DELETE FROM schedule_runs
	     WHERE task = $1 AND id <= (SELECT id FROM schedule_runs WHERE task = $1 ORDER BY id DESC OFFSET $9::int - 1 LIMIT 1)
	)
	SELECT id, started_at, finished_at FROM run`

// insertRun runs startRunSQL for r.
func insertRun(ctx context.Context, db *sql.DB, r *Run, keep int) error {
	return db.QueryRowContext(ctx, startRunSQL, r.Task, r.ScheduledFor, r.Trigger, r.JobID, r.Attempt, r.Process,
		r.Outcome, r.Summary, keep).Scan(&r.ID, &r.StartedAt, &r.FinishedAt)
}

// finishRunSQL records how a run ended.
const finishRunSQL = `
	UPDATE schedule_runs SET finished_at = clock_timestamp(), outcome = $2, summary = $3, error = $4
	 WHERE id = $1
	RETURNING finished_at`

// finishRun runs finishRunSQL for r.
func finishRun(ctx context.Context, db *sql.DB, r *Run) error {
	return db.QueryRowContext(ctx, finishRunSQL, r.ID, r.Outcome, r.Summary, r.Error).Scan(&r.FinishedAt)
}

const runColumns = `id, task, scheduled_for, trigger, job_id, attempt, process, started_at, finished_at, outcome, summary, error`

func scanRuns(rows *sql.Rows) ([]Run, error) {
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		var r Run
		if err := rows.Scan(&r.ID, &r.Task, &r.ScheduledFor, &r.Trigger, &r.JobID, &r.Attempt, &r.Process,
			&r.StartedAt, &r.FinishedAt, &r.Outcome, &r.Summary, &r.Error); err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// Recent lists the newest limit runs of all tasks, newest first.
func Recent(ctx context.Context, db *sql.DB, limit int) ([]Run, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+runColumns+` FROM schedule_runs ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("recent scheduled runs: %w", err)
	}
	runs, err := scanRuns(rows)
	if err != nil {
		return nil, fmt.Errorf("recent scheduled runs: %w", err)
	}
	return runs, nil
}

// Last is the newest run of each task that has one, and of them the newest that finished
// with an outcome other than skipped, keyed by task.
func Last(ctx context.Context, db *sql.DB) (last, lastDone map[string]Run, err error) {
	last, lastDone = map[string]Run{}, map[string]Run{}
	for _, q := range []struct {
		into  map[string]Run
		where string
	}{{last, "true"}, {lastDone, "outcome IN ('ok', 'failed')"}} {
		rows, err := db.QueryContext(ctx, `
			SELECT r.* FROM (SELECT DISTINCT task FROM schedule_runs) t
			 CROSS JOIN LATERAL (SELECT `+runColumns+` FROM schedule_runs
			                      WHERE task = t.task AND `+q.where+` ORDER BY id DESC LIMIT 1) r`)
		if err != nil {
			return nil, nil, fmt.Errorf("last scheduled runs: %w", err)
		}
		runs, err := scanRuns(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("last scheduled runs: %w", err)
		}
		for _, r := range runs {
			q.into[r.Task] = r
		}
	}
	return last, lastDone, nil
}

// Leader is the River client that leads the deployment and inserts the ticks, and until
// when its lease runs; ok is false when no process leads (none is running, or an election
// is under way).
func Leader(ctx context.Context, db *sql.DB) (id string, until time.Time, ok bool, err error) {
	err = db.QueryRowContext(ctx, `SELECT leader_id, expires_at FROM river_leader WHERE expires_at > now()`).Scan(&id, &until)
	if err == sql.ErrNoRows {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("river leader: %w", err)
	}
	return id, until, true, nil
}
