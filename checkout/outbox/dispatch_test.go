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
// events: each one reaches the handler, its dispatch job completes, and an event whose
// first dispatch failed after the handler wrote is dispatched again (the handler called
// twice) with still one effect, the failed attempt's write rolled back with it.
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
	done := map[string]bool{}
	for len(done) < len(ids) {
		select {
		case e := <-completed:
			done[string(e.Job.EncodedArgs)] = true
		case <-ctx.Done():
			t.Fatalf("%d of %d dispatch jobs completed", len(done), len(ids))
		}
	}
	if got, want := h.calls.Load(), int64(len(ids)+1); got != want {
		t.Errorf("handler called %d times, want %d (each event once, the failed one twice)", got, want)
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
