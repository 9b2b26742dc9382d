package dbtest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/pglocal"
)

// Pair is a primary with tekrar's schema and a streaming standby of it, for the tests of what
// may read a standby (the console's read-only pages).
type Pair struct {
	Primary, Standby       *sqlx.DB // pools with tekrar's driver settings (db.DSN)
	PrimaryURL, StandbyURL string
	standby                *pglocal.Server
}

// NewPair starts a private primary of its own (not the shared test server: a base backup
// copies a whole cluster, every test's database with it), migrates its database "tekrar",
// and starts a standby of it (pglocal.StartStandby). Both stop when the test ends. It needs
// the PostgreSQL binaries even when TEST_DATABASE_URL is set.
func NewPair(t testing.TB) Pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		t.Fatalf("start primary: %v", err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	admin, err := sql.Open("postgres", primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE tekrar"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	p := Pair{PrimaryURL: primary.URL("tekrar")}
	if err := migrate(ctx, p.PrimaryURL); err != nil {
		t.Fatalf("migrate primary: %v", err)
	}
	if p.standby, err = pglocal.StartStandby(ctx, primary, pglocal.Options{}); err != nil {
		t.Fatalf("start standby: %v", err)
	}
	t.Cleanup(func() { _ = p.standby.Stop() })
	p.StandbyURL = p.standby.URL("tekrar")
	p.Primary, p.Standby = Connect(t, p.PrimaryURL), Connect(t, p.StandbyURL)
	return p
}

// CatchUp waits until the standby has replayed everything the primary had written when it
// was called, failing the test after 20 s. It compares with the primary's insert position:
// the test primary commits asynchronously, so its write position (pg_current_wal_lsn) can
// stand before a commit that already returned.
func (p Pair) CatchUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var lsn string
	if err := p.Primary.GetContext(ctx, &lsn, "SELECT pg_current_wal_insert_lsn()::text"); err != nil {
		t.Fatalf("primary's WAL position: %v", err)
	}
	for {
		var done bool
		err := p.Standby.GetContext(ctx, &done, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn)
		if err != nil {
			t.Fatalf("standby's replay position: %v", err)
		}
		if done {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
