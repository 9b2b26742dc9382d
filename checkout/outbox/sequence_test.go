package outbox_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// newOrderRow inserts a pending order of the client and returns its id.
func newOrderRow(t *testing.T, db *sql.DB, clientID int64) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRow(`INSERT INTO orders (client_id, status, amount, currency, items, created_at, updated_at)
		VALUES ($1, 'pending', 1000, 'TRY', '[]', now(), now()) RETURNING id`, clientID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// sequences returns the sequences of the order's events, by their sequence.
func sequences(t *testing.T, db *sql.DB, orderID int64) []int64 {
	t.Helper()
	rows, err := db.Query(`SELECT (payload->>'sequence')::bigint FROM outbox_events WHERE order_id = $1 ORDER BY 1`, orderID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n sql.NullInt64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		if !n.Valid {
			t.Fatalf("an event of order %d has no sequence", orderID)
		}
		out = append(out, n.Int64)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// oneToN is 1, 2, …, n.
func oneToN(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// TestTheSequenceFollowsTheCommitOrder: an order's sequence is given under its row lock,
// held until the transaction ends. A second writer of the order's events waits for the
// first; when the first rolls back, its number is given again, so the order's events are
// numbered 1, 2, … without a gap, in the order their transactions committed. Another order
// is not held up and counts on its own. An event about no order carries no sequence, and
// every event of every type about an order does.
func TestTheSequenceFollowsTheCommitOrder(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clientID := newClientRow(t, d.DB)
	a, b := newOrderRow(t, d.DB, clientID), newOrderRow(t, d.DB, clientID)
	insert := func(tx outbox.Querier, order int64, typ string) outbox.Event {
		t.Helper()
		ev, err := outbox.Insert(ctx, tx, clientID, typ, sql.NullInt64{Int64: order, Valid: true}, map[string]any{"order": "ord_x"})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}

	first, err := d.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := insert(first, a, outbox.OrderPaid).Sequence(); !ok || n != 1 {
		t.Fatalf("first event of order a: sequence %d %v, want 1", n, ok)
	}
	second := make(chan outbox.Event, 1)
	go func() {
		tx, err := d.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Error(err)
			second <- outbox.Event{}
			return
		}
		defer tx.Rollback()
		ev, err := outbox.Insert(ctx, tx, clientID, outbox.RefundCreated, sql.NullInt64{Int64: a, Valid: true}, map[string]any{"order": "ord_x"})
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			t.Error(err)
		}
		second <- ev
	}()
	// Order b does not wait for a's writer.
	if n, _ := insert(d.DB, b, outbox.OrderPaid).Sequence(); n != 1 {
		t.Errorf("first event of order b: sequence %d, want 1", n)
	}
	select {
	case ev := <-second:
		t.Fatalf("a second writer of order a's events went through while the first was open: %s", ev.Payload)
	case <-time.After(300 * time.Millisecond):
	}
	if err := first.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, ok := (<-second).Sequence(); !ok || n != 1 {
		t.Errorf("after the first writer rolled back, the second got sequence %d %v, want 1 (no gap)", n, ok)
	}

	// Every type, and two events of one statement, in the statement's order.
	for _, typ := range outbox.Types {
		insert(d.DB, a, typ)
	}
	if _, err := d.DB.ExecContext(ctx, `
		WITH new_events (client_id, type, order_id, payload, created_at) AS (
		    SELECT CAST($1 AS bigint), `+outbox.TypeSQL(outbox.RefundCreated)+`, CAST($2 AS bigint), CAST('{"n": 1}' AS jsonb), now()
		    UNION ALL
		    SELECT $1, `+outbox.TypeSQL(outbox.OrderRefunded)+`, $2, CAST('{"n": 2}' AS jsonb), now()
		)`+outbox.InsertSQL, clientID, a); err != nil {
		t.Fatal(err)
	}
	want := oneToN(1 + len(outbox.Types) + 2)
	if got := sequences(t, d.DB, a); !slices.Equal(got, want) {
		t.Errorf("order a's sequences %v, want %v", got, want)
	}
	var inOrder bool
	if err := d.DB.QueryRow(`SELECT (SELECT payload->>'sequence' FROM outbox_events WHERE payload->>'n' = '1')::int + 1 =
		(SELECT payload->>'sequence' FROM outbox_events WHERE payload->>'n' = '2')::int`).Scan(&inOrder); err != nil || !inOrder {
		t.Errorf("two events of one statement are not numbered in its order (%v)", err)
	}
	if got := sequences(t, d.DB, b); !slices.Equal(got, []int64{1}) {
		t.Errorf("order b's sequences %v, want [1]", got)
	}
	var last int64
	if err := d.DB.QueryRow(`SELECT event_seq FROM orders WHERE id = $1`, a).Scan(&last); err != nil || last != want[len(want)-1] {
		t.Errorf("orders.event_seq of a is %d (%v), want its last event's %d", last, err, want[len(want)-1])
	}

	ev, err := outbox.Insert(ctx, d.DB, clientID, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": "ord_x"})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := ev.Sequence(); ok {
		t.Errorf("an event about no order has sequence %d, want none", n)
	}
}

// TestConcurrentWritersOfOneOrder: writers of two orders' events at once, each in its own
// transaction; each order's events are numbered 1 to n, each number once, whichever
// transaction came first, and the one order's writers do not change the other's numbers.
func TestConcurrentWritersOfOneOrder(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clientID := newClientRow(t, d.DB)
	orders := []int64{newOrderRow(t, d.DB, clientID), newOrderRow(t, d.DB, clientID)}
	const perOrder = 12
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 * perOrder {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tx, err := d.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer tx.Rollback()
			if _, err := outbox.Insert(ctx, tx, clientID, outbox.Types[i%len(outbox.Types)],
				sql.NullInt64{Int64: orders[i%2], Valid: true}, map[string]any{"order": "ord_x"}); err != nil {
				t.Error(err)
				return
			}
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, o := range orders {
		if got := sequences(t, d.DB, o); !slices.Equal(got, oneToN(perOrder)) {
			t.Errorf("order %d's sequences %v, want 1 to %d once each", o, got, perOrder)
		}
	}
}
