package outbox_test

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// newClientRow inserts a client and returns its id.
func newClientRow(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRow(`INSERT INTO clients (name, secret_hash) VALUES ('outbox', sha256(random()::text::bytea)) RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestAnInsertedEventIsQueuedOnce: the trigger queues the event for dispatch in the
// statement that inserts it, once, so that an event exists with its queue row or not at
// all: a rolled-back insert leaves neither.
func TestAnInsertedEventIsQueuedOnce(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clientID := newClientRow(t, d.DB)
	insert := func(commit bool) string {
		t.Helper()
		tx, err := d.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
		ev, err := outbox.Insert(ctx, tx, clientID, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": "ord_x"})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		return ev.ID
	}
	kept, dropped := insert(true), insert(false)
	var attempts int
	var discarded, lastError sql.NullString
	if err := d.QueryRowContext(ctx, `SELECT attempts, discarded_at::text, last_error FROM outbox_queue WHERE event_id = $1`, kept).
		Scan(&attempts, &discarded, &lastError); err != nil {
		t.Fatalf("the committed event's queue row: %v", err)
	}
	if attempts != 0 || discarded.Valid || lastError.Valid {
		t.Errorf("a new event's queue row: %d attempts, discarded %v, error %v; want none", attempts, discarded, lastError)
	}
	var rows, events int
	if err := d.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM outbox_queue), (SELECT count(*) FROM outbox_events WHERE id = $1)`, dropped).
		Scan(&rows, &events); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || events != 0 {
		t.Errorf("%d queue rows and the rolled-back event %d times; want 1 and 0", rows, events)
	}
}

// TestTypesAreTheDomain: the event_type domain allows exactly outbox.Types, so that a new
// type needs both its constant (which consumers and the console list) and a migration, and
// a type the database accepts is one every consumer knows.
func TestTypesAreTheDomain(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	var def string
	if err := d.DB.QueryRow(`SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		 WHERE c.contypid = 'event_type'::regtype AND c.contype = 'c'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, m := range regexp.MustCompile(`'([^']+)'::text`).FindAllStringSubmatch(def, -1) {
		allowed = append(allowed, m[1])
	}
	if !slices.Equal(allowed, outbox.Types) {
		t.Errorf("the event_type domain allows %v (%s), outbox.Types is %v, in its order", allowed, def, outbox.Types)
	}
	clientID := newClientRow(t, d.DB)
	for _, typ := range append(slices.Clone(outbox.Types), "order.shipped") {
		tx, err := d.DB.Begin()
		if err != nil {
			t.Fatal(err)
		}
		_, err = outbox.Insert(context.Background(), tx, clientID, typ, sql.NullInt64{}, map[string]any{"order": "ord_x"})
		if known := slices.Contains(outbox.Types, typ); (err == nil) != known {
			t.Errorf("insert an event of type %s: %v", typ, err)
		}
		tx.Rollback() //nolint:errcheck // nothing to keep
	}
}
