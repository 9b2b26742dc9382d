package checkouttest

import (
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
)

// Clock is a test's time, frozen until the test moves it, so that a lease, a due date or
// three days of retries pass without waiting. It is safe for concurrent use: the code under
// test reads it from its own goroutines while the test moves it.
type Clock struct {
	mu sync.Mutex
	at time.Time
}

// NewClock is a clock at at; the zero time is the present.
func NewClock(at time.Time) *Clock { return &Clock{at: start(at)} }

// start is at, or the present in microseconds, as Postgres keeps it: a frozen instant must
// compare equal to itself stored.
func start(at time.Time) time.Time {
	if at.IsZero() {
		return time.Now().UTC().Truncate(time.Microsecond)
	}
	return at
}

// Now is the clock's time, the func a Config's Now takes.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }

// Set moves the clock to t, backwards too.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.at = t; c.mu.Unlock() }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.at = c.at.Add(d); c.mu.Unlock() }

// Forward moves the clock to t if t is later, as a job queue's driver jumps to the next
// due instant and never takes time back for one already past.
func (c *Clock) Forward(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.at) {
		c.at = t
	}
}

// UTC reads an RFC 3339 instant of a test's calendar (fractions allowed); a test's own
// constant that does not parse is a bug of the test, so it panics.
func UTC(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Location loads the IANA zone name as a client's zone is loaded (clients.Location).
func Location(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := clients.Location(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// ClientRow inserts a bare client row named name and returns its id: for the tests that
// need a client to own rows but never authenticate it (its secret hash is of its name).
func ClientRow(t testing.TB, db sqlx.Queryer, name string) int64 {
	t.Helper()
	var id int64
	if err := sqlx.Get(db, &id, `INSERT INTO clients (name, secret_hash)
		VALUES (CAST($1 AS text), sha256(convert_to(CAST($1 AS text), 'UTF8'))) RETURNING id`, name); err != nil {
		t.Fatal(err)
	}
	return id
}
