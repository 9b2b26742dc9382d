package outbox_test

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"

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

// TestAnInsertedEventHasExactlyOneDispatchJob: the trigger enqueues the event's job in the
// statement that inserts it, with the unique key River computes itself, so that inserting
// the same job from Go is skipped as a duplicate.
func TestAnInsertedEventHasExactlyOneDispatchJob(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clientID := newClientRow(t, d.DB)
	tx, err := d.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := outbox.Insert(ctx, tx, clientID, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": "ord_x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	outbox.AddWorkers(workers, d.DB)
	rc, err := outbox.NewClient(d.DB, workers, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err = d.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := rc.InsertTx(ctx, tx, outbox.DispatchArgs{EventID: ev.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.UniqueSkippedAsDuplicate {
		t.Errorf("River inserted a second dispatch job for %s: the trigger's unique key or states differ from River's", ev.ID)
	}
	// And River, inserting it itself, writes the very key and states the trigger wrote.
	var sqlKey, sqlStates string
	if err := tx.QueryRowContext(ctx, `DELETE FROM river_job WHERE args->>'event_id' = $1 RETURNING encode(unique_key, 'hex'), unique_states::text`,
		ev.ID).Scan(&sqlKey, &sqlStates); err != nil {
		t.Fatal(err)
	}
	res, err = rc.InsertTx(ctx, tx, outbox.DispatchArgs{EventID: ev.ID}, nil)
	if err != nil || res.UniqueSkippedAsDuplicate {
		t.Fatalf("insert after delete: %v %+v", err, res)
	}
	var goKey, goStates string
	if err := tx.QueryRowContext(ctx, `SELECT encode(unique_key, 'hex'), unique_states::text FROM river_job WHERE id = $1`,
		res.Job.ID).Scan(&goKey, &goStates); err != nil {
		t.Fatal(err)
	}
	if sqlKey != goKey || sqlStates != goStates {
		t.Errorf("trigger wrote unique key %s states %s, River writes %s %s", sqlKey, sqlStates, goKey, goStates)
	}
	var jobs int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'event_id' = $2 AND queue = $3`,
		outbox.KindDispatch, ev.ID, outbox.Queue).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 {
		t.Errorf("%d dispatch jobs for one event, want 1", jobs)
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
