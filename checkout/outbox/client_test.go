package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// blockingHandler writes its effect, then waits, on its first call, until released or its
// context ends.
type blockingHandler struct {
	release chan struct{}
	blocked chan struct{}
	first   bool
}

func (h *blockingHandler) HandleEvent(ctx context.Context, tx *sql.Tx, ev outbox.Event) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO test_effects (event_id) VALUES ($1) ON CONFLICT (event_id) DO NOTHING`, ev.ID); err != nil {
		return err
	}
	if h.first {
		return nil
	}
	h.first = true
	close(h.blocked)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startBlocked starts a client of one loop whose handler has blocked in its first batch.
func startBlocked(ctx context.Context, t *testing.T, d *sqlx.DB) (*blockingHandler, *outbox.Client) {
	t.Helper()
	h := &blockingHandler{release: make(chan struct{}), blocked: make(chan struct{})}
	rc, err := outbox.NewClient(d.DB, nil, outbox.Config{Handlers: []outbox.Handler{h}, Workers: 1, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.blocked:
	case <-ctx.Done():
		t.Fatal("the handler was never called")
	}
	return h, rc
}

// TestStopLetsItsBatchCommit: Stop waits for the batch in flight and lets it commit; the
// events are dispatched, once.
func TestStopLetsItsBatchCommit(t *testing.T) {
	t.Parallel()
	d := newEffectsDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := insertEvents(t, d, 3)
	h, rc := startBlocked(ctx, t, d)
	stopped := make(chan error, 1)
	go func() { stopped <- rc.Stop(ctx) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while its batch was still running", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(h.release)
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if rows, multi := effects(t, d); rows != len(ids) || multi != 0 || queued(t, d) != 0 {
		t.Errorf("after Stop: %d effects (%d twice), %d queued; want %d, none, none", rows, multi, queued(t, d), len(ids))
	}
}

// TestStopAndCancelRollsItsBatchBack: StopAndCancel cancels the batch in flight: nothing it
// did commits, its events are in the queue again, with no attempt counted against them.
func TestStopAndCancelRollsItsBatchBack(t *testing.T) {
	t.Parallel()
	d := newEffectsDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := insertEvents(t, d, 3)
	_, rc := startBlocked(ctx, t, d)
	stopCtx, stopCancel := context.WithTimeout(ctx, 10*time.Second)
	defer stopCancel()
	if err := rc.StopAndCancel(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop and cancel: %v", err)
	}
	var waiting, attempted int
	if err := d.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE attempts > 0) FROM outbox_queue`).Scan(&waiting, &attempted); err != nil {
		t.Fatal(err)
	}
	if rows, _ := effects(t, d); rows != 0 || waiting != len(ids) || attempted != 0 {
		t.Errorf("after StopAndCancel: %d effects, %d queued (%d with an attempt counted); want none, %d, none", rows, waiting, attempted, len(ids))
	}
}
