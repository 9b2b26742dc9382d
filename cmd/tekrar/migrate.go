package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/migrations"
)

// migrateCmds are `tekrar migrate up|down|status`, each on --database-url (DATABASE_URL).
func migrateCmds(e env) []*cobra.Command {
	sub := func(name, short string, do func(ctx context.Context, p *goose.Provider) error) *cobra.Command {
		var url string
		return command(e, name, short, exactArgs(0),
			func(s *config.Set) { s.DatabaseURL(&url, "Postgres connection string (required)") },
			func(ctx context.Context, _ []string) error {
				pool, err := connect(ctx, url, 4)
				if err != nil {
					return err
				}
				defer pool.Close()
				p, err := migrations.NewProvider(pool.DB)
				if err != nil {
					return err
				}
				return do(ctx, p)
			})
	}
	return []*cobra.Command{
		sub("up", "apply every pending migration", func(ctx context.Context, p *goose.Provider) error {
			res, err := p.Up(ctx)
			for _, r := range res {
				fmt.Fprintln(e.stdout, r)
			}
			if err != nil {
				return fmt.Errorf("migrate up: %w", err)
			}
			if len(res) == 0 {
				fmt.Fprintln(e.stdout, "no pending migrations")
			}
			return nil
		}),
		sub("down", "roll back the last applied migration", func(ctx context.Context, p *goose.Provider) error {
			r, err := p.Down(ctx)
			if err != nil {
				return fmt.Errorf("migrate down: %w", err)
			}
			fmt.Fprintln(e.stdout, r)
			return nil
		}),
		sub("status", "list every migration: applied (when) or pending", func(ctx context.Context, p *goose.Provider) error {
			st, err := p.Status(ctx)
			if err != nil {
				return fmt.Errorf("migrate status: %w", err)
			}
			for _, s := range st {
				applied := "pending"
				if !s.AppliedAt.IsZero() {
					applied = s.AppliedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(e.stdout, "%-8s %-40s %s\n", s.State, s.Source.Path, applied)
			}
			return nil
		}),
	}
}

// connect opens the database a command requires (--database-url or DATABASE_URL).
func connect(ctx context.Context, url string, maxConns int) (*sqlx.DB, error) {
	if url == "" {
		return nil, usageError("DATABASE_URL (or --database-url) is required")
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return db.Open(cctx, url, maxConns)
}
