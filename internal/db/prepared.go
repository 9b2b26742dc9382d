package db

import (
	"context"
	"database/sql"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Prepared runs every query as a prepared statement, prepared once per query text and
// connection. Postgres then skips parsing and planning on the hot paths, which is most of
// its work for a one-row lookup. It satisfies sqlx's Queryer and Execer interfaces, so a
// package passes it where it would pass the pool.
//
// Only constant query texts belong here: each distinct text keeps a statement per
// connection for the life of the process.
type Prepared struct {
	*sqlx.DB
	stmts sync.Map // query text → *sqlx.Stmt
}

// NewPrepared wraps a pool.
func NewPrepared(d *sqlx.DB) *Prepared { return &Prepared{DB: d} }

func (p *Prepared) stmt(ctx context.Context, query string) (*sqlx.Stmt, error) {
	if s, ok := p.stmts.Load(query); ok {
		return s.(*sqlx.Stmt), nil
	}
	s, err := p.DB.PreparexContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := p.stmts.LoadOrStore(query, s); loaded {
		s.Close()
		return prev.(*sqlx.Stmt), nil
	}
	return s, nil
}

// QueryContext runs a prepared query.
func (p *Prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryxContext runs a prepared query.
func (p *Prepared) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	s, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryxContext(ctx, args...)
}

// QueryRowxContext runs a prepared query for one row. If the statement cannot be prepared
// (the database is down, say), the query runs unprepared so that the row carries the error.
func (p *Prepared) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	s, err := p.stmt(ctx, query)
	if err != nil {
		return p.DB.QueryRowxContext(ctx, query, args...)
	}
	return s.QueryRowxContext(ctx, args...)
}

// ExecContext runs a prepared statement.
func (p *Prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}
