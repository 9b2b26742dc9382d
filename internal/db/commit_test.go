package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/pglocal"
)

// syncServer starts a private server whose every COMMIT waits for a synchronous standby
// once waitForGhost is called, and returns a pool on it (Open's) and an admin connection.
func syncServer(t *testing.T) (pool *sqlx.DB, admin *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pglocal.Start(ctx, pglocal.Options{Settings: []string{"synchronous_commit=on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if admin, err = sql.Open("postgres", srv.URL("postgres")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if pool, err = Open(ctx, srv.URL("postgres"), 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	if _, err := admin.ExecContext(ctx, "CREATE TABLE paid (n int)"); err != nil {
		t.Fatal(err)
	}
	return pool, admin
}

// waitForGhost makes every COMMIT wait for a standby named ghost, which never comes, until
// the returned function sets the server back.
func waitForGhost(t *testing.T, pool *sqlx.DB, admin *sql.DB) (normal func()) {
	t.Helper()
	set := func(names string) {
		t.Helper()
		if _, err := admin.Exec("ALTER SYSTEM SET synchronous_standby_names = '" + names + "'"); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec("SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		// The pool's backends read the reloaded file before their next command.
		eventually(t, func() bool {
			var got string
			return pool.Get(&got, "SHOW synchronous_standby_names") == nil && got == names
		})
		if names != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := pglocal.AwaitSyncRep(ctx, admin); err != nil {
				t.Fatal(err)
			}
		}
	}
	set("ghost")
	return func() { set("") }
}

func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}

// syncRepWaiter is the backend whose COMMIT waits for the standby, once there is one.
func syncRepWaiter(t *testing.T, admin *sql.DB) int {
	t.Helper()
	var pid int
	eventually(t, func() bool {
		return admin.QueryRow(`SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&pid) == nil
	})
	return pid
}

// A COMMIT that waits for a synchronous standby is not cancelled when the caller's context
// ends: the backend still waits (pg_stat_activity says SyncRep) and InTx has not returned.
// When the backend is then terminated the outcome is unknown (the row stands on this node
// alone), and InTx says ErrCommitUnknown, not driver.ErrBadConn; an autocommit statement on
// a detached context answers so too, and database/sql did not run it again on another
// connection (one row, not two).
func TestACommitRunsToItsAnswer(t *testing.T) {
	pool, admin := syncServer(t)
	normal := waitForGhost(t, pool, admin)
	defer normal()

	t.Run("transaction", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- InTx(ctx, pool, "pay", func(tx *sqlx.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO paid VALUES (1)")
				return err
			})
		}()
		pid := syncRepWaiter(t, admin)
		cancel()
		time.Sleep(300 * time.Millisecond)
		var event sql.NullString
		if err := admin.QueryRow(`SELECT wait_event FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&event); err != nil || event.String != "SyncRep" {
			t.Fatalf("after the context ended the COMMIT's backend waits on %q (%v), want SyncRep", event.String, err)
		}
		select {
		case err := <-done:
			t.Fatalf("InTx returned %v while its COMMIT waited", err)
		default:
		}
		if _, err := admin.Exec("SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if !errors.Is(err, ErrCommitUnknown) || errors.Is(err, driver.ErrBadConn) || !IsUnavailable(err) {
			t.Fatalf("InTx after the backend was terminated: %v, want ErrCommitUnknown", err)
		}
	})

	t.Run("autocommit statement", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := pool.ExecContext(Detach(ctx), "INSERT INTO paid VALUES (2)")
			done <- err
		}()
		pid := syncRepWaiter(t, admin)
		cancel()
		if _, err := admin.Exec("SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			normal() // a second run on another connection waits for the standby too
			t.Fatalf("no answer 10s after the backend was terminated: the statement ran again (%v)", <-done)
		}
		if !errors.Is(err, ErrCommitUnknown) {
			t.Fatalf("a detached statement after its backend was terminated: %v, want ErrCommitUnknown", err)
		}
	})

	normal()
	var n int
	if err := admin.QueryRow("SELECT count(*) FROM paid WHERE n = 2").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the statement whose outcome was unknown left %d rows (%v), want 1: run once", n, err)
	}
}
