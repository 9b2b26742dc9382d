package checkout

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"

	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/process"
)

// inTx is the one transaction helper (internal/db.InTx), named short for the package's use.
var inTx = tdb.InTx

// nullString is s for a nullable text column, where "" is stored as NULL (internal/db.NullString).
var nullString = tdb.NullString

// processName names this process in the runs it records (internal/process.Name).
var processName = process.Name

// statement is a named statement (internal/db.Statement) under the short names the
// package's statements use: named binds one, get and exec run it, text and args are what it
// sends.
type statement[P any] struct {
	tdb.Statement[P]
	text string
}

// named binds query to P's fields (internal/db.Named); it panics on a mistake, when the
// package loads.
func named[P any](query string) statement[P] {
	s := tdb.Named[P](query)
	return statement[P]{Statement: s, text: s.Text}
}

func (s statement[P]) args(p *P) []any { return s.Args(p) }

func (s statement[P]) get(ctx context.Context, db sqlx.QueryerContext, dest any, p P) error {
	return s.Get(ctx, db, dest, p)
}

func (s statement[P]) exec(ctx context.Context, db sqlx.ExecerContext, p P) (sql.Result, error) {
	return s.Exec(ctx, db, p)
}
