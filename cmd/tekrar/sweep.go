package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/checkout/sweeper"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/schedule"
)

// sweep runs one sweep pass by hand, as serve's scheduled task "sweep" does every
// TEKRAR_SWEEP_INTERVAL: under the task's lock, with a run record.
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
	logger := app.NewLogger(cfg, e.stderr)
	s := sweeper.New(pool, app.SweepConfig(cfg, nil), logger)
	cfg.SweepInterval = time.Minute // the task's period; a run by hand has none
	sched, err := schedule.New(pool.DB, schedule.Config{Logger: logger}, app.SweepTask(cfg, s))
	if err != nil {
		return err
	}
	run, err := sched.RunNow(ctx, "sweep")
	if err != nil {
		return err
	}
	if run.Outcome.String == schedule.OutcomeSkipped {
		fmt.Fprintln(e.stdout, "another process is sweeping; nothing done")
		return nil
	}
	fmt.Fprintln(e.stdout, run.Summary)
	return nil
}
