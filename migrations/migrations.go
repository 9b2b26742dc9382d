// Package migrations holds tekrar's schema as plain SQL files, embedded in the binary, and
// applies them with goose's Provider API so that no global state is involved.
//
// Each file is a goose SQL migration (-- +goose Up / -- +goose Down). Files are numbered; a
// package that owns a table adds the file that creates it. Migration 19 is written in Go
// (00019_outbox.go), because it applies River's schema with River's own migrator.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io"
	"log/slog"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// NewProvider returns a goose provider over the embedded migrations. A Postgres session lock
// makes concurrent starts of several replicas apply each migration once.
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker),
		goose.WithGoMigrations(outboxMigration()))
	if err != nil {
		return nil, fmt.Errorf("migration provider: %w", err)
	}
	return p, nil
}

// Up applies every pending migration.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := NewProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// quietLogger keeps River's migrator from logging each step it applies; goose reports the
// migration as a whole.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
