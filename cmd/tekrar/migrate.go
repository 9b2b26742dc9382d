package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/migrations"
)

func migrate(ctx context.Context, e env, args []string) error {
	pool, rest, err := openFromFlags(ctx, e, "migrate", args)
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(rest) != 1 {
		return usageError("tekrar migrate up|down|status")
	}
	p, err := migrations.NewProvider(pool.DB)
	if err != nil {
		return err
	}
	switch rest[0] {
	case "up":
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
	case "down":
		r, err := p.Down(ctx)
		if err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
		fmt.Fprintln(e.stdout, r)
	case "status":
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
	default:
		return usageError("unknown migrate command %q (want up, down or status)", rest[0])
	}
	return nil
}

// openFromFlags parses --database-url (or DATABASE_URL), which the command requires, and
// connects.
func openFromFlags(ctx context.Context, e env, command string, args []string, more ...func(*config.Set)) (*sqlx.DB, []string, error) {
	var url string
	s := config.NewSet(command, e.getenv, e.stderr)
	s.DatabaseURL(&url, "Postgres connection string (required)")
	for _, m := range more {
		m(s)
	}
	if err := s.Parse(args); err != nil {
		return nil, nil, err
	}
	if url == "" {
		return nil, nil, usageError("DATABASE_URL (or --database-url) is required")
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pool, err := db.Open(cctx, url, 4)
	if err != nil {
		return nil, nil, err
	}
	return pool, s.Args(), nil
}
