// Package dbtest gives every test a database of its own, with tekrar's schema already in it.
//
// A test binary starts one private PostgreSQL server (package pglocal) the first time a test
// asks for a database, migrates a template database once, and then clones it for each test
// with CREATE DATABASE ... TEMPLATE, which is far cheaper than migrating again. Tests can
// therefore run in parallel without seeing each other's rows. Set TEST_DATABASE_URL to use an
// existing server instead; its database is where the test databases are created from.
//
// Use it from TestMain so that the server is stopped when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }
//
// Without it the server still dies with the test binary and its directory is swept by a
// later run, but a TEST_DATABASE_URL server keeps the template database.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pglocal"
	"github.com/tekrar/tekrar/migrations"
)

// EnvURL names the variable that points the tests at an existing server.
const EnvURL = "TEST_DATABASE_URL"

// env is what the first test that needs a database sets up for the whole binary.
type env struct {
	server   *pglocal.Server // nil with TEST_DATABASE_URL
	adminURL string
	admin    *sql.DB
	template string
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error

	// createMu serializes CREATE DATABASE ... TEMPLATE. Postgres refuses to clone a template
	// that another session is using; Postgres 15 cloned concurrently without complaint when
	// measured, but the refusal is documented and one clone takes only tens of milliseconds.
	createMu sync.Mutex
)

// Main runs the tests and then stops what they started; it returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "dbtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// get starts the server and the template on first use, so test binaries that never touch
// the database pay nothing.
func get() (*env, error) {
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared, setupErr = setup(ctx)
	})
	return shared, setupErr
}

func setup(ctx context.Context) (_ *env, err error) {
	e := &env{adminURL: os.Getenv(EnvURL)}
	defer func() {
		if err != nil {
			_ = e.close(context.Background())
		}
	}()
	if e.adminURL == "" {
		if e.server, err = pglocal.Start(ctx, pglocal.Options{}); err != nil {
			return nil, fmt.Errorf("start test database server: %w", err)
		}
		e.adminURL = e.server.URL("postgres")
	} else if _, err := databaseURL(e.adminURL, "x"); err != nil {
		return nil, err
	}
	if e.admin, err = sql.Open("postgres", e.adminURL); err != nil {
		return nil, fmt.Errorf("open admin connection: %w", err)
	}

	name := "tekrar_tmpl_" + randomSuffix()
	if _, err := e.admin.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)); err != nil {
		return nil, fmt.Errorf("create template database: %w", err)
	}
	e.template = name
	if err := migrate(ctx, e.url(name)); err != nil {
		return nil, fmt.Errorf("migrate template database: %w", err)
	}
	return e, nil
}

// migrate applies the migrations and closes every connection it used, since a template with
// sessions on it cannot be cloned.
func migrate(ctx context.Context, url string) error {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrations.Up(ctx, db)
}

// teardown undoes setup if a test triggered it.
func teardown() error {
	// Orders this after any setup, and keeps a late caller from starting a server nobody stops.
	setupOnce.Do(func() { setupErr = errors.New("dbtest: database requested after Main returned") })
	if shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return shared.close(ctx)
}

func (e *env) close(ctx context.Context) error {
	var errs []error
	// The private server's directory goes with it; only a shared server keeps the template.
	if e.server == nil && e.template != "" {
		if _, err := e.admin.ExecContext(ctx, dropSQL(e.template)); err != nil {
			errs = append(errs, fmt.Errorf("drop template database: %w", err))
		}
	}
	if e.admin != nil {
		errs = append(errs, e.admin.Close())
	}
	if e.server != nil {
		errs = append(errs, e.server.Stop())
	}
	return errors.Join(errs...)
}

// url returns the URL of database name on the test server.
func (e *env) url(name string) string {
	if e.server != nil {
		return e.server.URL(name)
	}
	u, _ := databaseURL(e.adminURL, name) // validated in setup
	return u
}

func databaseURL(adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s must be a postgres:// URL, got %q", EnvURL, adminURL)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}

func dropSQL(name string) string {
	return "DROP DATABASE IF EXISTS " + pq.QuoteIdentifier(name) + " WITH (FORCE)"
}

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}

// NewURL creates a database for this test, a clone of the migrated template, and returns its
// lib/pq URL. The database is dropped when the test ends, whatever connections remain.
// A server that cannot start fails the test rather than skipping it: a skip would let a
// machine without PostgreSQL pass the suite.
func NewURL(t testing.TB) string {
	t.Helper()
	e, err := get()
	if err != nil {
		t.Fatal(err)
	}
	name := "tekrar_t_" + randomSuffix()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createMu.Lock()
	_, err = e.admin.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)+" TEMPLATE "+pq.QuoteIdentifier(e.template))
	createMu.Unlock()
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := e.admin.ExecContext(ctx, dropSQL(name)); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return e.url(name)
}

// New returns a connection pool to a fresh database for this test (see NewURL), with the
// driver settings tekrar itself connects with (db.DSN). The pool is closed when the test
// ends, before the database is dropped.
func New(t testing.TB) *sqlx.DB {
	t.Helper()
	return Connect(t, NewURL(t))
}

// Connect returns a connection pool to url with the driver settings tekrar itself connects
// with (db.DSN), closed when the test ends: before the database is dropped, when url is
// NewURL's.
func Connect(t testing.TB, url string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Connect("postgres", tdb.DSN(url))
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = db.Close() }) // registered after the drop, so it runs first
	return db
}

// Server returns the private server, for tests that restart or stop the database. It fails
// the test when TEST_DATABASE_URL is set, since a shared server is not the test's to restart.
func Server(t testing.TB) *pglocal.Server {
	t.Helper()
	e, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if e.server == nil {
		t.Fatalf("this test needs the private test database server, but %s is set: unset it to run this test", EnvURL)
	}
	return e.server
}

// AdminURL returns the URL of the database that test databases are created from, for tests
// that inspect the server as a whole.
func AdminURL(t testing.TB) string {
	t.Helper()
	e, err := get()
	if err != nil {
		t.Fatal(err)
	}
	return e.adminURL
}
