package pglocal

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"
)

// AwaitSyncRep returns once a COMMIT on db's server waits for a synchronous standby, after
// synchronous_standby_names was set and the configuration reloaded. SHOW is not enough: a
// backend reads the reloaded file before its next command, but whether a COMMIT waits is
// decided by a flag the checkpointer sets when it gets to the reload, a moment later (or
// longer, on a loaded machine). So it commits a probe, a table created on a connection of
// its own, until one waits; then it ends that backend (the probe stands on this node alone,
// as any commit whose wait is ended does) and returns. It is for tests of what a client
// sees while a COMMIT waits.
func AwaitSyncRep(ctx context.Context, db *sql.DB) error {
	for {
		waited, err := probeSyncRep(ctx, db)
		if err != nil || waited {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("await sync rep: no COMMIT waited: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probeSyncRep commits one probe and says whether its COMMIT waited for a standby.
func probeSyncRep(ctx context.Context, db *sql.DB) (waited bool, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("probe sync rep: %w", err)
	}
	defer conn.Close()
	// The probe's connection is never handed back to db: ended by pg_terminate_backend
	// while idle (the probe had committed just as the caller's deadline came), it would look
	// healthy to database/sql, and db's next user would read "connection reset". Raw
	// returning driver.ErrBadConn closes it; the deferred calls run in reverse, so this runs
	// after the probe's statement has returned.
	defer conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // it is the point
	var pid int
	if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return false, fmt.Errorf("probe sync rep: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		// Not ctx: a statement cancelled while its COMMIT waits would still be waiting.
		_, err := conn.ExecContext(context.Background(), fmt.Sprintf("CREATE TABLE syncrep_probe_%d ()", time.Now().UnixNano()))
		done <- err
	}()
	finished := false
	defer func() {
		if !finished { // an error while the probe may be waiting: end it, or it waits forever
			_, _ = db.ExecContext(context.Background(), "SELECT pg_terminate_backend($1)", pid)
			<-done
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			finished = true
			if err != nil {
				return false, fmt.Errorf("probe sync rep: %w", err)
			}
			return false, nil // committed without waiting: the flag is not set yet
		case <-tick.C:
		}
		var event sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT wait_event FROM pg_stat_activity WHERE pid = $1", pid).Scan(&event); err != nil {
			return false, fmt.Errorf("probe sync rep: %w", err)
		}
		if event.String != "SyncRep" {
			continue
		}
		if _, err := db.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			return false, fmt.Errorf("probe sync rep: end the probe: %w", err)
		}
		<-done // the backend is gone: its answer is an error, and the connection is dropped
		finished = true
		return true, nil
	}
}
