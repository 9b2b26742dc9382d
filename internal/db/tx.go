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
func InTx(ctx context.Context, db *sqlx.DB, what string, f func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}
