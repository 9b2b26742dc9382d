package db

import (
	"container/list"
	"context"
	"database/sql/driver"
	"strings"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"
)

// NamePrefix starts the text of a statement that every connection prepares once and keeps:
// a name comment, "-- name: OutboxGet :one", as sqlc writes one at the top of each of its
// queries.
//
// River's queries are written so, and River's database/sql driver runs them unprepared:
// Postgres then parses and plans each of them at every call. Measured under first-arrival
// load, planning was two thirds of what Postgres spent dispatching an outbox event (River
// fetching and completing its job, and the dispatch's own reads); completing one job took
// 0.5 ms to plan and 0.4 ms to run. River's queries are made to be prepared (its pgx driver
// prepares every statement), so the connection prepares the named ones and keeps them.
// tekrar names the statements its own workers run in River's transactions the same way.
//
// Unnamed statements are left alone: a prepared statement may be given a generic plan
// after five runs, and the console's queries, over skewed data, are planned for their
// arguments every time. The hot paths that prepare do so through Prepared.
const NamePrefix = "-- name: "

// maxCached bounds the statements a connection keeps (River has some fifty named queries,
// few of them hot); the one used least recently is closed to make room.
const maxCached = 64

// cached is a prepared statement of a connection, by its text.
type cached struct {
	query string
	s     *stmt
}

// stmtCache is a connection's prepared named statements. database/sql uses a connection
// from one goroutine at a time, so it needs no lock.
type stmtCache struct {
	byQuery map[string]*list.Element
	lru     list.List // of *cached, most recent first
}

// prepared returns the connection's statement for query, preparing it the first time.
// false: it could not be prepared (the connection is lost, its transaction failed, the
// text is wrong), and the caller runs the query unprepared, which answers with the error
// the query itself meets. A prepared statement outlives a rolled-back transaction.
func (c *conn) prepared(ctx context.Context, query string) (*stmt, bool) {
	if e, ok := c.cache.byQuery[query]; ok {
		c.cache.lru.MoveToFront(e)
		return e.Value.(*cached).s, true
	}
	if !c.sends() {
		return nil, false
	}
	ds, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, false
	}
	if c.cache.byQuery == nil {
		c.cache.byQuery = make(map[string]*list.Element)
	}
	s := ds.(*stmt)
	c.cache.byQuery[query] = c.cache.lru.PushFront(&cached{query: query, s: s})
	if c.cache.lru.Len() > maxCached {
		c.forget(c.cache.lru.Back().Value.(*cached).query)
	}
	return s, true
}

// forget closes and drops the connection's statement for query.
func (c *conn) forget(query string) {
	e, ok := c.cache.byQuery[query]
	if !ok {
		return
	}
	delete(c.cache.byQuery, query)
	c.cache.lru.Remove(e)
	e.Value.(*cached).s.Close() //nolint:errcheck // a lost connection closes it anyway
}

// stale reports whether err says a prepared statement's result changed shape under it
// ("cached plan must not change result type": a migration altered a table it reads). The
// statement is dropped, so that the next call prepares it again; the call that met it
// fails, before it ran, and its caller (River retries a job) runs it again.
func stale(err error) bool {
	e := pq.As(err, pqerror.FeatureNotSupported)
	return e != nil && strings.Contains(e.Message, "cached plan must not change result type")
}

// isNamed reports whether query is one to prepare and keep.
func isNamed(query string) bool { return strings.HasPrefix(query, NamePrefix) }

func (c *conn) queryPrepared(ctx context.Context, s *stmt, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.QueryContext(ctx, args)
	if stale(err) {
		c.forget(query)
	}
	return r, err
}

func (c *conn) execPrepared(ctx context.Context, s *stmt, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.ExecContext(ctx, args)
	if stale(err) {
		c.forget(query)
	}
	return r, err
}
