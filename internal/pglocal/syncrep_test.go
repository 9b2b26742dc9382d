package pglocal

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Once AwaitSyncRep returns, the next COMMIT on any connection waits for the standby; with
// no standby named, no COMMIT ever waits and AwaitSyncRep says so when its time is up.
func TestAwaitSyncRep(t *testing.T) {
	s := startServer(t, Options{Settings: []string{"synchronous_commit=on"}})
	db := open(t, s.URL("postgres"))
	exec1(t, db, "CREATE TABLE paid (n int)")

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := AwaitSyncRep(ctx, db); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with no standby named AwaitSyncRep said %v, want the deadline", err)
	}

	exec1(t, db, "ALTER SYSTEM SET synchronous_standby_names = 'ghost'")
	exec1(t, db, "SELECT pg_reload_conf()")
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := AwaitSyncRep(ctx, db); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pid int
	if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(context.Background(), "INSERT INTO paid VALUES (1)")
		done <- err
	}()
	waitFor(t, 10*time.Second, "the COMMIT to wait for the standby", func() bool {
		var event string
		return db.QueryRow("SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&event) == nil && event == "SyncRep"
	})
	select {
	case err := <-done:
		t.Fatalf("the COMMIT returned %v without a standby", err)
	default:
	}
	exec1(t, db, "ALTER SYSTEM SET synchronous_standby_names = ''")
	exec1(t, db, "SELECT pg_reload_conf()")
	if err := <-done; err != nil {
		t.Fatalf("the COMMIT released by the reload: %v", err)
	}
}
