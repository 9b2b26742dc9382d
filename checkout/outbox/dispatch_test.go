package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// effectsSQL is the table of a test consumer: one row per event it reacted to, however
// often it was called.
const effectsSQL = `
CREATE TABLE test_effects (event_id text PRIMARY KEY, calls int NOT NULL DEFAULT 1)`

// countingHandler records each call; a call that fails still counts (in calls, outside
// the rolled-back transaction).
type countingHandler struct {
	calls    atomic.Int64
	failFor  map[string]bool // event ids whose first dispatch fails after the handler wrote
	failures atomic.Int64
}

func (h *countingHandler) HandleEvent(ctx context.Context, tx *sql.Tx, ev outbox.Event) error {
	h.calls.Add(1)
	if _, err := tx.ExecContext(ctx, `INSERT INTO test_effects (event_id) VALUES ($1) ON CONFLICT (event_id) DO NOTHING`, ev.ID); err != nil {
		return err
	}
	if h.failFor[ev.ID] && h.failures.Add(1) == 1 {
		return errors.New("fails once after writing its effect")
	}
	return nil
}

// TestEveryEventIsDispatchedAndARetryKeepsOneEffect starts River on the outbox and emits
// events: each one reaches the handler and its dispatch job completes. An event whose first
// dispatch failed after the handler wrote is dispatched again (the handler called twice)
// with still one effect, the failed attempt's write rolled back with it; an event
// dispatched twice (a duplicate job) is handled twice and still has one effect, the
// handler's ON CONFLICT absorbing the second.
func TestEveryEventIsDispatchedAndARetryKeepsOneEffect(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := d.ExecContext(ctx, effectsSQL); err != nil {
		t.Fatal(err)
	}
	clientID := newClientRow(t, d.DB)
	var ids []string
	for range 20 {
		ev, err := outbox.Insert(ctx, d.DB, clientID, outbox.RefundCreated, sql.NullInt64{}, map[string]any{"refund": "rf_x"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	// A second dispatch job for one event, as a job rescued from a stalled process while the
	// first still runs would be: inserted by hand, without the unique key.
	if _, err := d.ExecContext(ctx, `INSERT INTO river_job (kind, args, queue, state) VALUES ($1, jsonb_build_object('event_id', $2::text), $3, 'available')`,
		outbox.KindDispatch, ids[5], outbox.Queue); err != nil {
		t.Fatal(err)
	}
	h := &countingHandler{failFor: map[string]bool{ids[3]: true}}
	workers := river.NewWorkers()
	outbox.AddWorkers(workers, d.DB, h)
	rc, err := outbox.NewClient(d.DB, workers, outbox.Config{Workers: 4, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	completed, stopSub := rc.Subscribe(river.EventKindJobCompleted)
	defer stopSub()
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rc.Stop(context.Background())
	jobs := len(ids) + 1
	for done := 0; done < jobs; done++ {
		select {
		case <-completed:
		case <-ctx.Done():
			t.Fatalf("%d of %d dispatch jobs completed", done, jobs)
		}
	}
	if got, want := h.calls.Load(), int64(len(ids)+2); got != want {
		t.Errorf("handler called %d times, want %d (each event once, the failed one and the duplicated one twice)", got, want)
	}
	var rows, multi int
	if err := d.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE calls > 1) FROM test_effects`).Scan(&rows, &multi); err != nil {
		t.Fatal(err)
	}
	if rows != len(ids) || multi != 0 {
		t.Errorf("%d effects (%d written twice), want %d once each", rows, multi, len(ids))
	}
	var open int
	if err := d.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state <> 'completed'`, outbox.KindDispatch).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Errorf("%d dispatch jobs not completed", open)
	}
}
