package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/db"
)

// sweep runs one sweep pass by hand, as every serve process does every TEKRAR_SWEEP_INTERVAL.
func sweep(ctx context.Context, e env, args []string) error {
	cfg, err := config.LoadServer("sweep", args, e.getenv, e.stderr)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return usageError("DATABASE_URL (or --database-url) is required")
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	pool, err := db.Open(cctx, cfg.DatabaseURL, 2)
	cancel()
	if err != nil {
		return err
	}
	defer pool.Close()
	s := checkout.NewSweeper(pool, app.SweepConfig(cfg, nil), app.NewLogger(cfg, e.stderr))
	res, err := s.Pass(ctx)
	if err != nil {
		return err
	}
	if res.Skipped {
		fmt.Fprintln(e.stdout, "another process is sweeping; nothing done")
		return nil
	}
	fmt.Fprintf(e.stdout, "tombstoned %d keys, deleted %d, forgot %d tombstones, deleted %d events in %d batches (%s)\n",
		res.KeysTombstoned, res.KeysDeleted, res.TombstonesForgotten, res.EventsDeleted, res.Batches, res.Took.Round(time.Millisecond))
	return nil
}
