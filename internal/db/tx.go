package db

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// InTx runs f in a transaction, committed if f returns nil and rolled back otherwise (a
// panic in f included). f's error comes back as it is, so that sentinels and problems
// reach the caller unwrapped; failing to begin or commit is wrapped with what, the name of
// the work, as every error names the work that failed. It is the one transaction helper of
// the packages on sqlx (checkout, and checkout/deliveries, which may not import checkout).
//
// The transaction runs on Detach(ctx): the request's end cannot cancel it, so its COMMIT
// runs to its answer, and a COMMIT whose connection is lost returns ErrCommitUnknown, never
// a plain failure. The statements f runs before COMMIT keep the context f gives them (the
// request's, mostly): cancelling one aborts the transaction, a definite outcome, and the
// pool's stall timeout bounds each of them as it bounds the COMMIT (Detach says why that,
// and not statement_timeout, is the bound).
func InTx(ctx context.Context, db *sqlx.DB, what string, f func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(Detach(ctx), nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		if lost(err) { // a pool not opened by Open: its driver says ErrBadConn or EOF
			err = unknownError{err}
		}
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}
