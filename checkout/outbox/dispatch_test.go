package outbox_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// effectsSQL is the table of a test consumer: one row per event it reacted to, however
// often it was called.
const effectsSQL = `
CREATE TABLE test_effects (event_id text PRIMARY KEY, calls int NOT NULL DEFAULT 1)`

// newEffectsDB is a test database with the test consumer's table.
func newEffectsDB(t *testing.T) *sqlx.DB {
	t.Helper()
	d := dbtest.New(t)
	if _, err := d.Exec(effectsSQL); err != nil {
		t.Fatal(err)
	}
	return d
}

// countingHandler records each call; a call that fails still counts (in calls, outside
// the rolled-back transaction).
type countingHandler struct {
	calls    atomic.Int64
	perEvent sync.Map        // event id -> *atomic.Int64
	failFor  map[string]bool // event ids whose first dispatch fails after the handler wrote
	failures atomic.Int64
	always   string        // an event id whose every dispatch fails
	block    chan struct{} // when set, the first call waits until it is closed
	blocked  chan struct{} // closed when the first call is waiting
	once     sync.Once
	writeErr atomic.Pointer[error] // the first error of its write
}

func (h *countingHandler) HandleEvent(ctx context.Context, tx *sql.Tx, ev outbox.Event) error {
	h.calls.Add(1)
	n, _ := h.perEvent.LoadOrStore(ev.ID, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if _, err := tx.ExecContext(ctx, `INSERT INTO test_effects (event_id) VALUES ($1) ON CONFLICT (event_id) DO UPDATE SET calls = test_effects.calls + 1`, ev.ID); err != nil {
		h.writeErr.CompareAndSwap(nil, &err)
		return err
	}
	if h.block != nil {
		h.once.Do(func() { close(h.blocked); <-h.block })
	}
	if h.failFor[ev.ID] && h.failures.Add(1) == 1 {
		return errors.New("fails once after writing its effect")
	}
	if ev.ID == h.always {
		return errors.New("this event cannot be handled: <b>never</b>")
	}
	return nil
}

func (h *countingHandler) callsFor(id string) int64 {
	n, ok := h.perEvent.Load(id)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// insertEvents commits n events of one client and returns their ids, oldest first.
func insertEvents(t *testing.T, d *sqlx.DB, n int) []string {
	t.Helper()
	clientID := newClientRow(t, d.DB)
	ids := make([]string, 0, n)
	for range n {
		ev, err := outbox.Insert(context.Background(), d.DB, clientID, outbox.RefundCreated, sql.NullInt64{}, map[string]any{"refund": "rf_x"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// effects counts the test consumer's committed effects, and those written more than once.
func effects(t *testing.T, d *sqlx.DB) (rows, multi int) {
	t.Helper()
	if err := d.QueryRow(`SELECT count(*), count(*) FILTER (WHERE calls > 1) FROM test_effects`).Scan(&rows, &multi); err != nil {
		t.Fatal(err)
	}
	return rows, multi
}

func queued(t *testing.T, d *sqlx.DB) int {
	t.Helper()
	var n int
	if err := d.QueryRow(`SELECT count(*) FROM outbox_queue`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitQueueEmpty waits until every event was dispatched.
func waitQueueEmpty(ctx context.Context, t *testing.T, d *sqlx.DB) {
	t.Helper()
	for queued(t, d) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d events still queued", queued(t, d))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestEveryEventIsDispatchedOnceByManyDispatchers: two clients of four loops each, batches
// of 25, dispatch 400 events; the handler is called exactly once per event, each effect
// committed once: no batch is taken twice (FOR UPDATE SKIP LOCKED, and the DELETE that
// commits with the effects), none is left.
func TestEveryEventIsDispatchedOnceByManyDispatchers(t *testing.T) {
	t.Parallel()
	d := newEffectsDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := insertEvents(t, d, 400)
	h := &countingHandler{}
	for range 2 {
		rc, err := outbox.NewClient(d.DB, nil, outbox.Config{Handlers: []outbox.Handler{h}, Workers: 4, Batch: 25, PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer rc.Stop(context.Background()) //nolint:errcheck // the test is over
	}
	waitQueueEmpty(ctx, t, d)
	if got := h.calls.Load(); got != int64(len(ids)) {
		t.Errorf("handler called %d times for %d events, want once each", got, len(ids))
	}
	if rows, multi := effects(t, d); rows != len(ids) || multi != 0 {
		t.Errorf("%d effects (%d written twice), want %d once each", rows, multi, len(ids))
	}
}

// TestEveryEventIsDispatchedAndARetryKeepsOneEffect: an event whose handler fails after
// writing rolls its batch back; the batch's events are dispatched again, one a
// transaction, and each has one effect, the failed attempt's writes rolled back with it.
// An event queued again after its dispatch (a queue row restored by a failover, say) is
// handled again, and the handler's idempotence keeps its one effect.
func TestEveryEventIsDispatchedAndARetryKeepsOneEffect(t *testing.T) {
	t.Parallel()
	d := newEffectsDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := insertEvents(t, d, 20)
	h := &countingHandler{failFor: map[string]bool{ids[3]: true}}
	disp := &outbox.Dispatcher{DB: d.DB, Handlers: []outbox.Handler{h}}
	n, err := disp.Dispatch(ctx)
	if err != nil || n != len(ids) {
		t.Fatalf("dispatch: %d events, %v; want %d", n, err, len(ids))
	}
	if got := h.callsFor(ids[3]); got != 2 {
		t.Errorf("the failing event was handled %d times, want 2 (its batch, then alone)", got)
	}
	if got := h.callsFor(ids[19]); got != 1 {
		t.Errorf("an event after the failing one in its batch was handled %d times, want 1 (the batch stopped at the failure)", got)
	}
	if rows, multi := effects(t, d); rows != len(ids) || multi != 0 {
		t.Errorf("%d effects (%d written twice), want %d once each: a rolled-back attempt's writes were kept", rows, multi, len(ids))
	}
	if q := queued(t, d); q != 0 {
		t.Errorf("%d events still queued", q)
	}
	if _, err := d.ExecContext(ctx, `INSERT INTO outbox_queue (event_id) VALUES ($1)`, ids[5]); err != nil {
		t.Fatal(err)
	}
	if n, err := disp.Dispatch(ctx); err != nil || n != 1 {
		t.Fatalf("dispatch the event queued again: %d, %v", n, err)
	}
	var calls int
	if err := d.QueryRowContext(ctx, `SELECT calls FROM test_effects WHERE event_id = $1`, ids[5]).Scan(&calls); err != nil || calls != 2 {
		t.Errorf("the event queued again: handled %d times (%v), want 2, its effect kept once", calls, err)
	}
}

// TestAnEventThatCannotBeDispatchedHoldsBackNoOther: an event whose handler always fails is
// attempted, its error kept, retried no sooner than its backoff, and discarded after its
// last attempt; the events of its batch are dispatched meanwhile.
func TestAnEventThatCannotBeDispatchedHoldsBackNoOther(t *testing.T) {
	t.Parallel()
	d := newEffectsDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := insertEvents(t, d, 10)
	h := &countingHandler{always: ids[2]}
	var dispatched, failed atomic.Int64
	disp := &outbox.Dispatcher{DB: d.DB, Handlers: []outbox.Handler{h}, MaxAttempts: 2,
		Observe: func(n, f int) { dispatched.Add(int64(n)); failed.Add(int64(f)) }}
	if n, err := disp.Dispatch(ctx); err != nil || n != 9 {
		t.Fatalf("first dispatch: %d events, %v; want 9", n, err)
	}
	state := func() (attempts int, lastError string, wait time.Duration, discarded bool) {
		t.Helper()
		var secs float64
		if err := d.QueryRowContext(ctx, `SELECT attempts, coalesce(last_error, ''), extract(epoch FROM available_at - now()), discarded_at IS NOT NULL
			 FROM outbox_queue WHERE event_id = $1`, ids[2]).Scan(&attempts, &lastError, &secs, &discarded); err != nil {
			t.Fatal(err)
		}
		return attempts, lastError, time.Duration(secs * float64(time.Second)), discarded
	}
	attempts, lastError, wait, discarded := state()
	if attempts != 1 || !strings.Contains(lastError, "<b>never</b>") || wait < 500*time.Millisecond || discarded {
		t.Errorf("after one failure: %d attempts, error %q, next in %s, discarded %v; want 1, the handler's error, about 1s, no", attempts, lastError, wait, discarded)
	}
	if n, err := disp.Dispatch(ctx); err != nil || n != 0 {
		t.Errorf("dispatch before the retry is due: %d events, %v; want none", n, err)
	}
	if _, err := d.ExecContext(ctx, `UPDATE outbox_queue SET available_at = now() WHERE event_id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if n, err := disp.Dispatch(ctx); err != nil || n != 0 {
		t.Errorf("the retry: %d events, %v; want none dispatched", n, err)
	}
	if attempts, _, _, discarded := state(); attempts != 2 || !discarded {
		t.Errorf("after the last attempt: %d attempts, discarded %v; want 2, discarded", attempts, discarded)
	}
	if _, err := d.ExecContext(ctx, `UPDATE outbox_queue SET available_at = now() WHERE event_id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if n, err := disp.Dispatch(ctx); err != nil || n != 0 || h.callsFor(ids[2]) != 3 {
		t.Errorf("a discarded event was attempted again: %d dispatched, %v, handled %d times; want 3", n, err, h.callsFor(ids[2]))
	}
	if rows, _ := effects(t, d); rows != 9 {
		t.Errorf("%d effects, want the 9 other events'", rows)
	}
	if dispatched.Load() != 9 || failed.Load() != 2 {
		t.Errorf("observed %d dispatched, %d failed; want 9 and 2", dispatched.Load(), failed.Load())
	}
}

// TestAFrozenDispatcherCommitsNothingLater: a dispatcher that stops between two statements
// of its batch (a process frozen, a stalled machine) holds its events only until Postgres
// ends its idle transaction (Hold); another dispatcher then dispatches them, and the
// frozen one, when it wakes, commits nothing: every event has one effect, handled by the
// one that committed.
func TestAFrozenDispatcherCommitsNothingLater(t *testing.T) {
	t.Parallel()
	d := newEffectsDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := insertEvents(t, d, 5)
	frozen := &countingHandler{block: make(chan struct{}), blocked: make(chan struct{})}
	// A frozen process's contexts do not run: the dispatcher's own ends its batch only at
	// twice Hold, and Postgres at Hold.
	a := &outbox.Dispatcher{DB: d.DB, Handlers: []outbox.Handler{frozen}, Hold: time.Second}
	done := make(chan error, 1)
	go func() {
		_, err := a.Dispatch(context.WithoutCancel(ctx))
		done <- err
	}()
	select {
	case <-frozen.blocked:
	case <-ctx.Done():
		t.Fatal("the dispatcher to freeze never handled an event")
	}
	awake := &countingHandler{}
	b := &outbox.Dispatcher{DB: d.DB, Handlers: []outbox.Handler{awake}, Hold: time.Second}
	if n, err := b.Dispatch(ctx); err != nil || n != 0 {
		t.Fatalf("while the frozen dispatcher holds its batch: %d dispatched, %v; want none", n, err)
	}
	took := time.Now()
	for queued(t, d) > 0 {
		if _, err := b.Dispatch(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the frozen dispatcher's events were never dispatched by another: %d queued", queued(t, d))
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("the frozen dispatcher's batch was dispatched by another %s later", time.Since(took).Round(time.Millisecond))
	close(frozen.block)
	<-done
	// What freed the batch was Postgres (idle_in_transaction_session_timeout), not the
	// frozen process's own context, which ends its batch only at twice Hold and would have
	// rolled the transaction back itself (sql.ErrTxDone): its next write found its
	// connection closed by the server.
	var got error
	if p := frozen.writeErr.Load(); p != nil {
		got = *p
	}
	if !errors.Is(got, driver.ErrBadConn) {
		t.Errorf("the frozen dispatcher's next write failed with %v; want its connection ended by Postgres (driver.ErrBadConn)", got)
	}
	if rows, multi := effects(t, d); rows != len(ids) || multi != 0 {
		t.Errorf("%d effects (%d written twice), want %d once each", rows, multi, len(ids))
	}
	if awake.calls.Load() != int64(len(ids)) {
		t.Errorf("the awake dispatcher handled %d events, want %d", awake.calls.Load(), len(ids))
	}
	if q := queued(t, d); q != 0 {
		t.Errorf("%d events queued after the frozen dispatcher woke", q)
	}
}
