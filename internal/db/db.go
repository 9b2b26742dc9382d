// Package db opens tekrar's Postgres pool and classifies its errors, so that every package
// answers "the store is down" and "that row already exists" the same way.
package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"
)

// Option changes how Open connects.
type Option func(*options)

type options struct{ stall time.Duration }

// StallTimeout bounds every database call, connecting included: when the server sends
// nothing for d (it is frozen, or the network drops packets), the call fails with a
// network error that IsUnavailable and IsStalled recognise, instead of waiting for as
// long as the server is gone. See stall.go for why a context deadline is not enough.
// Without it a call waits as long as the server; migrations, which may wait on a lock or
// build an index for minutes, run so.
func StallTimeout(d time.Duration) Option { return func(o *options) { o.stall = d } }

// Open returns a pool on url and checks that the server answers within the context. Its
// connections are dropped after an error saying their node was demoted, and a detached
// statement's lost connection is ErrCommitUnknown (conn.go).
func Open(ctx context.Context, url string, maxConns int, opts ...Option) (*sqlx.DB, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	pc, err := pq.NewConnector(DSN(url))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if o.stall > 0 {
		pc.Dialer(stallDialer{timeout: o.stall})
	}
	c := &connector{pq: pc}
	d := sqlx.NewDb(sql.OpenDB(c), "postgres")
	d.SetMaxOpenConns(maxConns)
	d.SetMaxIdleConns(maxConns)
	c.dropIdle = func() { // database/sql closes the idle connections past the limit
		d.SetMaxIdleConns(0)
		d.SetMaxIdleConns(maxConns)
	}
	// Recycle connections now and then so that a failover or a pgbouncer restart is
	// picked up without a restart of tekrar.
	d.SetConnMaxLifetime(30 * time.Minute)
	if err := d.PingContext(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return d, nil
}

// DSN returns url with binary_parameters on. lib/pq then sends a query with arguments in
// one round trip (parse, bind and execute together) instead of two (prepare, then execute):
// on the replay path that halves the round trips. The price is that []byte arguments are
// sent as binary, so JSON must be passed as a string, never as []byte.
func DSN(url string) string {
	if strings.Contains(url, "binary_parameters=") {
		return url
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		if strings.Contains(url, "?") {
			return url + "&binary_parameters=yes"
		}
		return url + "?binary_parameters=yes"
	}
	return url + " binary_parameters=yes"
}

// IsUniqueViolation reports whether err is a unique constraint violation, optionally on one
// named constraint.
func IsUniqueViolation(err error, constraint string) bool {
	e := pq.As(err, pqerror.UniqueViolation)
	return e != nil && (constraint == "" || e.Constraint == constraint)
}

// IsCheckViolation reports whether err is a CHECK constraint violation on the named
// constraint.
func IsCheckViolation(err error, constraint string) bool {
	e := pq.As(err, pqerror.CheckViolation)
	return e != nil && (constraint == "" || e.Constraint == constraint)
}

// IsUnavailable reports whether err means the database could not be reached, is going
// away or can no longer write (a demoted primary: 25006), as opposed to a query that the
// database refused. Callers fail closed on it: the client is told to retry, and nothing is
// executed without its record. A commit whose outcome is unknown is one too; callers that
// answer it apart test ErrCommitUnknown first.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrCommitUnknown) || pq.As(err, pqerror.ReadOnlySQLTransaction) != nil {
		return true
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOENT) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if e := pq.As(err); e != nil {
		if e.Fatal() {
			return true // the server ended the session, or refused to start one
		}
		switch e.Code.Class() {
		case "08", // connection exception
			"57", // operator intervention: admin shutdown, crash shutdown, cannot connect now
			"53": // insufficient resources: too many connections, out of memory
			return true
		}
	}
	return false
}
