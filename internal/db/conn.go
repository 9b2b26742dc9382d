package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"
)

// ErrCommitUnknown is a commit whose outcome tekrar cannot know: the connection was lost, or
// the server went away, after the COMMIT (or a statement that commits on its own) was sent.
// The change may stand or not; under synchronous replication it may stand on the primary
// alone, to be lost by a failover. It is never "failed": nothing runs the work again
// blindly and nothing releases its key, which stays for its lease to run out and for the
// client's retry or the completer to finish it, looking first at what stands.
var ErrCommitUnknown = errors.New("commit outcome unknown")

// unknownError is ErrCommitUnknown with its cause in the message only: the cause is often
// driver.ErrBadConn, on which database/sql would run the statement again on another
// connection, the blind second run this error exists to prevent.
type unknownError struct{ cause error }

func (e unknownError) Error() string { return ErrCommitUnknown.Error() + ": " + e.cause.Error() }
func (e unknownError) Unwrap() error { return ErrCommitUnknown }

type detachedKey struct{}

// Detach returns ctx, values kept, without its cancellation, for work whose outcome must be
// known: a transaction (InTx) or a statement that commits on its own (an engine's claim or
// completion). lib/pq cancels a running statement, COMMIT included, when its context ends,
// and a cancelled COMMIT that waits for a synchronous standby leaves the transaction
// committed on the primary alone while the client hears it failed. On a detached context
// the COMMIT runs to its answer, and a connection lost before the answer is
// ErrCommitUnknown, never a failure that database/sql retries on another connection.
//
// What bounds the work then is the pool's stall timeout (StallTimeout, TEKRAR_DB_TIMEOUT):
// a lock wait, a frozen server or a standby that does not confirm ends when the server has
// sent nothing for that long, and the connection is closed. Not a server-side
// statement_timeout: it cancels a COMMIT's wait for the standby exactly as the client's
// cancel does (docs/recovery.md, "A commit runs to its answer").
func Detach(ctx context.Context) context.Context {
	return context.WithValue(context.WithoutCancel(ctx), detachedKey{}, true)
}

func detached(ctx context.Context) bool { return ctx.Value(detachedKey{}) != nil }

// lost reports whether err means the connection or the server went away mid-call: what was
// sent may or may not have run.
func lost(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if e := pq.As(err); e != nil {
		switch {
		case e.Fatal(), e.Code.Class() == "08",
			e.Code == pqerror.AdminShutdown, e.Code == pqerror.CrashShutdown, e.Code == pqerror.CannotConnectNow:
			return true
		}
	}
	return false
}

// demoted reports whether err says the connection's node can no longer write or is going
// away: the connection is dropped from the pool, so that the next use opens a new one,
// which target_session_attrs=read-write sends to the primary.
func demoted(err error) bool {
	return lost(err) || pq.As(err, pqerror.ReadOnlySQLTransaction) != nil
}

// connector opens lib/pq connections wrapped in conn. Its epoch counts the errors that said
// a node was demoted or gone: a connection opened in an earlier epoch is dropped when the
// pool next looks at it, so that after a failover the pool does not hand out, one failure
// at a time, every connection it kept to the former primary; and dropIdle, called once
// per epoch, closes the idle ones at once.
type connector struct {
	pq       driver.Connector
	epoch    atomic.Int64
	dropIdle func()
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	born := c.epoch.Load()
	cn, err := c.pq.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{pq: cn, owner: c, born: born}, nil
}

func (c *connector) Driver() driver.Driver { return c.pq.Driver() }

// conn is a lib/pq connection that adds three things lib/pq lacks. It is dropped from the pool
// after an error saying its node was demoted: lib/pq marks a connection bad when it is
// lost or the server ends the session, but not after 25006 read_only_sql_transaction, so a
// pooled connection to a former primary kept failing; and the pool's other connections
// opened before that error go with it (connector's epoch). And a statement on a detached context
// (Detach) whose connection is lost answers ErrCommitUnknown instead of driver.ErrBadConn.
// And a named statement (NamePrefix) is prepared once and kept (stmtcache.go).
type conn struct {
	pq    driver.Conn // lib/pq's, which implements every interface used below
	bad   atomic.Bool
	owner *connector
	born  int64     // the owner's epoch when the connection was opened
	cache stmtCache // named statements, prepared (stmtcache.go)
}

var (
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.StmtExecContext    = (*stmt)(nil)
	_ driver.StmtQueryContext   = (*stmt)(nil)
)

// sends is whether lib/pq will send what it is given: a connection it marked bad answers
// driver.ErrBadConn at once, sending nothing, and database/sql may retry that elsewhere.
func (c *conn) sends() bool { return c.pq.(driver.Validator).IsValid() }

// valid is whether the pool may keep the connection: lib/pq sends on it, and neither it nor
// any connection opened before or with it saw its node demoted or gone.
func (c *conn) valid() bool { return !c.bad.Load() && c.born == c.owner.epoch.Load() && c.sends() }

// observe notes err of a call that was sent on c: a demoted node's connection is dropped,
// and when the call may have committed (unknown), a lost connection is ErrCommitUnknown.
func (c *conn) observe(unknown bool, err error) error {
	if err == nil || err == io.EOF { // io.EOF: the end of a result's rows
		return err
	}
	if demoted(err) {
		c.bad.Store(true)
		// Once per epoch, however many connections see it.
		if c.owner.epoch.CompareAndSwap(c.born, c.born+1) && c.owner.dropIdle != nil {
			go c.owner.dropIdle()
		}
	}
	if unknown && lost(err) {
		return unknownError{err}
	}
	return err
}

func (c *conn) IsValid() bool { return c.valid() }

func (c *conn) ResetSession(ctx context.Context) error {
	if !c.valid() {
		return driver.ErrBadConn
	}
	return c.pq.(driver.SessionResetter).ResetSession(ctx)
}

func (c *conn) Close() error { return c.pq.Close() }

func (c *conn) Ping(ctx context.Context) error {
	return c.observe(false, c.pq.(driver.Pinger).Ping(ctx))
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.pq.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.pq.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, c.observe(false, err)
	}
	return &stmt{c: c, pq: s}, nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	t, err := c.pq.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, c.observe(false, err)
	}
	return &tx{c: c, pq: t}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if isNamed(query) {
		if s, ok := c.prepared(ctx, query); ok {
			return c.execPrepared(ctx, s, query, args)
		}
	}
	sent := c.sends()
	r, err := c.pq.(driver.ExecerContext).ExecContext(ctx, query, args)
	return r, c.observe(sent && detached(ctx), err)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if isNamed(query) {
		if s, ok := c.prepared(ctx, query); ok {
			return c.queryPrepared(ctx, s, query, args)
		}
	}
	sent := c.sends()
	r, err := c.pq.(driver.QueryerContext).QueryContext(ctx, query, args)
	if err != nil {
		return nil, c.observe(sent && detached(ctx), err)
	}
	return &rows{Rows: r, c: c, unknown: detached(ctx)}, nil
}

// tx is a transaction of conn: every COMMIT whose connection is lost is ErrCommitUnknown,
// whatever its context.
type tx struct {
	c  *conn
	pq driver.Tx
}

func (t *tx) Commit() error {
	sent := t.c.sends()
	return t.c.observe(sent, t.pq.Commit())
}

func (t *tx) Rollback() error { return t.c.observe(false, t.pq.Rollback()) }

// stmt is a prepared statement of conn.
type stmt struct {
	c  *conn
	pq driver.Stmt
}

func (s *stmt) Close() error  { return s.pq.Close() }
func (s *stmt) NumInput() int { return s.pq.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	sent := s.c.sends()
	var r driver.Result
	var err error
	if se, ok := s.pq.(driver.StmtExecContext); ok {
		r, err = se.ExecContext(ctx, args)
	} else { // lib/pq's COPY FROM STDIN
		r, err = s.pq.Exec(values(args)) //nolint:staticcheck // the driver has no other entry
	}
	return r, s.c.observe(sent && detached(ctx), err)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	sent := s.c.sends()
	var r driver.Rows
	var err error
	if sq, ok := s.pq.(driver.StmtQueryContext); ok {
		r, err = sq.QueryContext(ctx, args)
	} else {
		r, err = s.pq.Query(values(args)) //nolint:staticcheck // the driver has no other entry
	}
	if err != nil {
		return nil, s.c.observe(sent && detached(ctx), err)
	}
	return &rows{Rows: r, c: s.c, unknown: detached(ctx)}, nil
}

// rows is a result of conn. An autocommit statement commits after its last row, while lib/pq
// reads to the end of the result (Next, Close): a connection lost there is lost at COMMIT.
type rows struct {
	driver.Rows
	c       *conn
	unknown bool
}

func (r *rows) Next(dest []driver.Value) error { return r.c.observe(r.unknown, r.Rows.Next(dest)) }
func (r *rows) Close() error                   { return r.c.observe(r.unknown, r.Rows.Close()) }

func (r *rows) HasNextResultSet() bool {
	n, ok := r.Rows.(driver.RowsNextResultSet)
	return ok && n.HasNextResultSet()
}

func (r *rows) NextResultSet() error {
	n, ok := r.Rows.(driver.RowsNextResultSet)
	if !ok {
		return io.EOF
	}
	return r.c.observe(r.unknown, n.NextResultSet())
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}

func values(args []driver.NamedValue) []driver.Value {
	v := make([]driver.Value, len(args))
	for i, a := range args {
		v[i] = a.Value
	}
	return v
}
