package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrReadOnly is what Writable returns when the database answers but is a standby: a replica
// pointed at it could read but not take a payment, so it is not ready.
var ErrReadOnly = errors.New("the database answers but is a standby (read-only): no writable primary")

// Querier is the one method Writable needs; *sql.DB and *sqlx.DB have it.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Writable returns the readiness check for Ready: one round trip asking whether the server
// takes writes. A ping would pass on a standby, and after a failover a replica whose pool
// still holds a demoted node must not say it is ready.
func Writable(db Querier) func(context.Context) error {
	return func(ctx context.Context) error {
		var writable bool
		if err := db.QueryRowContext(ctx, "SELECT NOT pg_is_in_recovery()").Scan(&writable); err != nil {
			return fmt.Errorf("readiness: %w", err)
		}
		if !writable {
			return ErrReadOnly
		}
		return nil
	}
}
