package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
)

// sweep runs one sweep pass by hand, as every serve process does every TEKRAR_SWEEP_INTERVAL.
// It reads only the settings a pass uses (BindSweep), not the whole server's.
func sweepCmd(e env) *cobra.Command {
	var cfg config.Server
	return command(e, "sweep", "run one pass of the key sweeper", exactArgs(0),
		func(s *config.Set) { config.BindSweep(s, &cfg) },
		func(ctx context.Context, _ []string) error { return sweep(ctx, e, cfg) })
}

func sweep(ctx context.Context, e env, cfg config.Server) error {
	pool, err := connect(ctx, cfg.DatabaseURL, 2)
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
