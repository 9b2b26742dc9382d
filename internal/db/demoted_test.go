package db

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/tekrar/tekrar/internal/pglocal"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func start(t *testing.T, opts pglocal.Options) *pglocal.Server {
	t.Helper()
	return startOf(t, nil, opts)
}

// startOf starts a streaming standby of primary (pglocal.StartStandby), or with a nil
// primary a server of its own.
func startOf(t *testing.T, primary *pglocal.Server, opts pglocal.Options) *pglocal.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := pglocal.Start
	if primary != nil {
		start = func(ctx context.Context, opts pglocal.Options) (*pglocal.Server, error) {
			return pglocal.StartStandby(ctx, primary, opts)
		}
	}
	s, err := start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// A failover as the pool sees it: a primary and a streaming standby of it, and a pool whose
// URL names both with target_session_attrs=read-write, holding idle connections to the
// primary. The primary is made read-only (as a demoted node is) and the standby promoted.
// The first write on a pooled connection fails with 25006, which IsUnavailable calls
// unavailable (503, retry); every write after it reaches the new primary, and the pool
// keeps no connection to the old node.
func TestPooledConnectionsToADemotedNodeAreDropped(t *testing.T) {
	oldPort, newPort := freePort(t), freePort(t)
	primary := start(t, pglocal.Options{Port: oldPort})
	old, err := sql.Open("postgres", primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.Exec("CREATE TABLE written (n int)"); err != nil {
		t.Fatal(err)
	}
	standby := startOf(t, primary, pglocal.Options{Port: newPort})
	promoted, err := sql.Open("postgres", standby.TCPURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer promoted.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const app, size = "demoted-test", 4
	url := fmt.Sprintf("postgres://postgres@/postgres?host=127.0.0.1,127.0.0.1&port=%d,%d&sslmode=disable&target_session_attrs=read-write&application_name=%s",
		oldPort, newPort, app)
	pool, err := Open(ctx, url, size)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Fill the pool: size connections at once, all on the primary, then idle in the pool.
	var conns []*sql.Conn
	for range size {
		c, err := pool.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	onOld := func() int {
		t.Helper()
		var n int
		if err := old.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := onOld(); n != size {
		t.Fatalf("%d pooled connections on the primary, want %d", n, size)
	}

	for _, q := range []string{"ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"} {
		if _, err := old.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var promotedOK bool
	if err := promoted.QueryRow("SELECT pg_promote()").Scan(&promotedOK); err != nil || !promotedOK {
		t.Fatalf("pg_promote: %v %v", promotedOK, err)
	}
	time.Sleep(100 * time.Millisecond) // the old node's backends have the reload signal

	_, err = pool.ExecContext(ctx, "INSERT INTO written VALUES (0)")
	if pq.As(err, pqerror.ReadOnlySQLTransaction) == nil || !IsUnavailable(err) {
		t.Fatalf("first write on a pooled connection to the demoted node: %v, want 25006, unavailable", err)
	}
	for i := 1; i <= 2*size; i++ {
		var writable bool
		var port int
		err := pool.QueryRowContext(ctx, `WITH w AS (INSERT INTO written VALUES ($1) RETURNING n)
		    SELECT NOT pg_is_in_recovery(), inet_server_port() FROM w`, i).Scan(&writable, &port)
		if err != nil || !writable || port != newPort {
			t.Fatalf("write %d after the failover: writable %v on port %d (%v), want the new primary on %d", i, writable, port, err, newPort)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for onOld() != 0 {
		if time.Now().After(deadline) {
			var state, query string
			_ = old.QueryRow(`SELECT state, query FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&state, &query)
			t.Fatalf("%d connections to the demoted node still open: %s %q, pool %+v", onOld(), state, query, pool.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
