package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
)

// installmentsRunCmd charges the installments due now (or --at) once, as the scheduler's
// job does. It takes no lock: two runs at once, or a run after one killed half way, charge
// each installment once (see checkout/installments_run.go).
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
	svc := checkout.NewService(pool, provider, checkout.Config{
		Routes:          api.Routes,
		Lease:           cfg.Lease,
		ProviderTimeout: cfg.ProviderTimeout,
		Crash:           app.CrashHook(cfg, logger),
		Now:             clock,
	}, logger)
	defer svc.Close()
	summary, err := svc.ChargeDueInstallments(ctx, at)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "installments due at %s: %s\n", at.UTC().Format(time.RFC3339), summary)
	return nil
}
