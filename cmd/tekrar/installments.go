package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/checkout/installments"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/schedule"
)

// installmentsRunCmd charges the installments due now (or --at) once, as the scheduler's
// job does, and records the run as the scheduled ones are (trigger hand). It takes no lock:
// two runs at once, or a run after one killed half way, charge each installment once (see
// package checkout/installments).
func installmentsRunCmd(e env) *cobra.Command {
	var cfg config.Server
	var at string
	return command(e, "run", "charge every installment that is due", exactArgs(0),
		func(s *config.Set) { config.BindInstallments(s, &cfg, &at) },
		func(ctx context.Context, _ []string) error { return runInstallments(ctx, e, cfg, at) })
}

func runInstallments(ctx context.Context, e env, cfg config.Server, atText string) error {
	clock := app.Clock(cfg)
	at := app.Now(clock)
	if atText != "now" {
		t, err := time.Parse(time.RFC3339Nano, atText)
		if err != nil {
			return usageError("--at: %q is neither now nor an RFC 3339 time", atText)
		}
		at = t
	}
	pool, err := connect(ctx, cfg.DatabaseURL, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	logger := app.NewLogger(cfg, e.stderr)
	var provider psp.Provider
	if cfg.PSPURL != "" {
		provider = psp.NewClient(cfg.PSPURL, &http.Client{Timeout: 2 * cfg.ProviderTimeout})
	} else {
		provider = psp.NewSandbox(pool, psp.SandboxOptions{Now: clock})
	}
	charger := installments.New(pool, provider, app.InstallmentsConfig(cfg, clock, app.CrashHook(cfg, logger)), logger)
	// Recorded as the scheduled runs are, so that the console's Schedule page lists it beside
	// them, but without the task's lock: a run by hand beside a scheduled one charges each
	// installment once all the same.
	sched, err := schedule.New(pool.DB, schedule.Config{Logger: logger}, app.InstallmentsTask(charger))
	if err != nil {
		return err
	}
	run, err := sched.RunByHand(ctx, "installments", at)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "installments due at %s: %s\n", at.UTC().Format(time.RFC3339), run.Summary)
	return nil
}
