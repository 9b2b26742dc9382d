package migrations_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/migrations"
)

// TestDispatchJobsMoveToTheOutboxQueue: migration 48 moves each event's River dispatch job
// that is not completed into outbox_queue, keeping what the console shows of it (attempts,
// the next attempt, the last error, the discard); a completed job moves nothing, and stays
// for River's cleaner; a cancelled one (a job without its event) is dropped. Down turns the
// queue's rows back into dispatch jobs, so that the release before finds its events to
// dispatch.
func TestDispatchJobsMoveToTheOutboxQueue(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := migrations.NewProvider(d.DB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 47); err != nil {
		t.Fatal(err)
	}
	// Five events, each with the dispatch job the trigger of migration 19 inserted; then
	// each job put in a state of its own.
	var ids []string
	if err := d.SelectContext(ctx, &ids, `
		WITH c AS (INSERT INTO clients (name, secret_hash) VALUES ('old', sha256('secret')) RETURNING id)
		INSERT INTO outbox_events (client_id, type, payload, created_at)
		SELECT c.id, 'refund.created', jsonb_build_object('n', n), now() - n * interval '1 minute'
		  FROM c, generate_series(1, 5) n
		RETURNING id`); err != nil {
		t.Fatal(err)
	}
	set := func(id, sql string, args ...any) {
		t.Helper()
		res, err := d.ExecContext(ctx, `UPDATE river_job SET `+sql+` WHERE kind = 'outbox_dispatch' AND args->>'event_id' = $1`,
			append([]any{id}, args...)...)
		if n, _ := res.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("set %s: %d rows, %v", sql, n, err)
		}
	}
	retryAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	// ids[0]: available, as inserted.
	set(ids[1], `state = 'retryable', attempt = 3, scheduled_at = $2,
		errors = ARRAY[jsonb_build_object('error', 'first', 'attempt', 2), jsonb_build_object('error', 'last', 'attempt', 3)]`, retryAt)
	set(ids[2], `state = 'discarded', attempt = 25, finalized_at = now(),
		errors = ARRAY[jsonb_build_object('error', 'gave up', 'attempt', 25)]`)
	set(ids[3], `state = 'completed', attempt = 1, finalized_at = now()`)
	set(ids[4], `state = 'cancelled', attempt = 1, finalized_at = now()`)
	if _, err := p.UpTo(ctx, 48); err != nil {
		t.Fatal(err)
	}

	type row struct {
		EventID     string         `db:"event_id"`
		Attempts    int            `db:"attempts"`
		AvailableAt time.Time      `db:"available_at"`
		LastError   sql.NullString `db:"last_error"`
		Discarded   bool           `db:"discarded"`
	}
	var rows []row
	if err := d.SelectContext(ctx, &rows, `SELECT event_id, attempts, available_at, last_error, discarded_at IS NOT NULL AS discarded
		FROM outbox_queue ORDER BY attempts`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d queue rows (%+v), want 3: the available, the retrying and the discarded job's", len(rows), rows)
	}
	if r := rows[0]; r.EventID != ids[0] || r.Attempts != 0 || r.LastError.Valid || r.Discarded {
		t.Errorf("the available job became %+v", r)
	}
	if r := rows[1]; r.EventID != ids[1] || r.Attempts != 3 || r.LastError.String != "last" || r.Discarded ||
		!r.AvailableAt.Equal(retryAt) {
		t.Errorf("the retrying job became %+v; want 3 attempts, its last error, its next attempt at %s", r, retryAt)
	}
	if r := rows[2]; r.EventID != ids[2] || r.Attempts != 25 || r.LastError.String != "gave up" || !r.Discarded {
		t.Errorf("the discarded job became %+v", r)
	}
	var jobs []string
	if err := d.SelectContext(ctx, &jobs, `SELECT args->>'event_id' FROM river_job WHERE kind = 'outbox_dispatch'`); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0] != ids[3] {
		t.Errorf("dispatch jobs left: %v; want only the completed one (%s)", jobs, ids[3])
	}
	// A new event is queued by the new trigger, and has no job.
	if _, err := d.ExecContext(ctx, `INSERT INTO outbox_events (client_id, type, payload)
		SELECT client_id, type, payload FROM outbox_events LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	var queued, allJobs int
	if err := d.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM outbox_queue), (SELECT count(*) FROM river_job)`).Scan(&queued, &allJobs); err != nil {
		t.Fatal(err)
	}
	if queued != 4 || allJobs != 1 {
		t.Errorf("after a new event: %d queue rows and %d River jobs, want 4 and 1", queued, allJobs)
	}

	if _, err := p.DownTo(ctx, 47); err != nil {
		t.Fatal(err)
	}
	var back []struct {
		State   string `db:"state"`
		Attempt int    `db:"attempt"`
	}
	if err := d.SelectContext(ctx, &back, `SELECT state::text AS state, attempt FROM river_job
		WHERE kind = 'outbox_dispatch' AND args->>'event_id' <> $1 ORDER BY attempt`, ids[3]); err != nil {
		t.Fatal(err)
	}
	if len(back) != 4 || back[0].State != "available" || back[2].State != "available" || back[2].Attempt != 3 ||
		back[3].State != "discarded" || back[3].Attempt != 25 {
		t.Errorf("down made dispatch jobs %+v; want the new event's and the available one available, the retrying one available after 3 attempts, the discarded one discarded", back)
	}
}
