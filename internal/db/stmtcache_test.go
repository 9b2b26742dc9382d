package db

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/pglocal"
)

// onePool is a pool of one connection on a server of its own, and that connection pinned,
// so that a test reads pg_prepared_statements of the session its statements ran in.
func onePool(t *testing.T) (context.Context, *sql.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := start(t, pglocal.Options{})
	pool, err := Open(ctx, srv.URL("postgres"), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	c, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

// preparedCount is how many statements the session has prepared whose text is query.
func preparedCount(t *testing.T, ctx context.Context, c *sql.Conn, query string) int {
	t.Helper()
	var n int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1`, query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A named statement is prepared once per connection and kept: run again, in a transaction,
// after a rolled-back transaction and after a failed one, it is the same prepared statement
// and answers right. An unnamed statement is not kept.
func TestNamedStatementsArePreparedOnce(t *testing.T) {
	ctx, c := onePool(t)
	named := NamePrefix + "Double :one\nSELECT CAST($1 AS int) * 2"
	unnamed := "SELECT CAST($1 AS int) * 3"
	run := func(q querier, query string, arg, mul int) {
		t.Helper()
		var got int
		if err := q.QueryRowContext(ctx, query, arg).Scan(&got); err != nil {
			t.Fatalf("%q: %v", query, err)
		}
		if got != arg*mul {
			t.Fatalf("%q with %d = %d, want %d", query, arg, got, arg*mul)
		}
	}
	for i := range 3 {
		run(c, named, i, 2)
		run(c, unnamed, i, 3)
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(tx, named, 7, 2)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	run(c, named, 8, 2) // outlives the rolled-back transaction it ran in
	tx, err = c.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("1/0 did not fail")
	}
	var x int
	if err := tx.QueryRowContext(ctx, named, 1).Scan(&x); err == nil {
		t.Fatal("a statement in a failed transaction ran")
	}
	tx.Rollback() //nolint:errcheck
	run(c, named, 9, 2)
	if n := preparedCount(t, ctx, c, named); n != 1 {
		t.Errorf("the named statement is prepared %d times in the session, want 1", n)
	}
	if n := preparedCount(t, ctx, c, unnamed); n != 0 {
		t.Errorf("the unnamed statement is kept prepared %d times, want 0", n)
	}
	// Exec takes the same path.
	if _, err := c.ExecContext(ctx, NamePrefix+"Noop :exec\nSELECT $1::int", 1); err != nil {
		t.Fatal(err)
	}
	if n := preparedCount(t, ctx, c, NamePrefix+"Noop :exec\nSELECT $1::int"); n != 1 {
		t.Errorf("an executed named statement is prepared %d times, want 1", n)
	}
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// A connection keeps at most maxCached statements, closing the least recently used: the
// first of maxCached+10 distinct ones is gone, the last is there, and each still answers.
func TestPreparedStatementsAreBounded(t *testing.T) {
	ctx, c := onePool(t)
	query := func(i int) string { return fmt.Sprintf("%sQ%d :one\nSELECT CAST($1 AS int) + %d", NamePrefix, i, i) }
	for i := range maxCached + 10 {
		var got int
		if err := c.QueryRowContext(ctx, query(i), 1).Scan(&got); err != nil || got != 1+i {
			t.Fatalf("query %d: %d %v", i, got, err)
		}
	}
	var n int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE $1`, NamePrefix+"Q%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != maxCached {
		t.Errorf("%d statements kept, want %d", n, maxCached)
	}
	if preparedCount(t, ctx, c, query(0)) != 0 || preparedCount(t, ctx, c, query(maxCached+9)) != 1 {
		t.Error("the oldest statement was kept or the newest dropped")
	}
}

// A migration that changes what a kept statement returns (a column added under SELECT *)
// fails that statement's next run before it runs, as Postgres answers for a prepared
// statement; the connection then drops it, and the run after that prepares it again and
// sees the new column.
func TestAStatementWhoseResultChangedIsPreparedAgain(t *testing.T) {
	ctx, c := onePool(t)
	if _, err := c.ExecContext(ctx, `CREATE TABLE t (a int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	q := NamePrefix + "AllOfT :many\nSELECT * FROM t WHERE a = $1"
	cols := func() ([]string, error) {
		rows, err := c.QueryContext(ctx, q, 1)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return rows.Columns()
	}
	if got, err := cols(); err != nil || len(got) != 1 {
		t.Fatalf("before: %v %v", got, err)
	}
	if _, err := c.ExecContext(ctx, `ALTER TABLE t ADD COLUMN b int`); err != nil {
		t.Fatal(err)
	}
	if _, err := cols(); err == nil || !stale(err) {
		t.Fatalf("the first run after the change: %v, want the stale plan's error", err)
	}
	if got, err := cols(); err != nil || len(got) != 2 {
		t.Fatalf("the run after: %v %v, want columns a and b", got, err)
	}
}
