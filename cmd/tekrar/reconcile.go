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
	"github.com/tekrar/tekrar/checkout/reconcile"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
)

// reconcileCmd runs one reconciliation by hand, as one serve process does every
// TEKRAR_RECONCILE_EVERY, and drives the refunds it owes before it exits. It takes no lock:
// two runs at once, or a run after one killed half way, write each compensation once and
// refund each charge once (see checkout/reconcile).
func reconcileCmd(e env) *cobra.Command {
	var cfg config.Server
	var since, until string
	return command(e, "reconcile", "reconcile the payment provider's charges of a window with the orders", exactArgs(0),
		func(s *config.Set) { config.BindReconcile(s, &cfg, &since, &until) },
		func(ctx context.Context, _ []string) error { return runReconcile(ctx, e, cfg, since, until) })
}

func runReconcile(ctx context.Context, e env, cfg config.Server, sinceText, untilText string) error {
	clock := app.Clock(cfg)
	now := app.Now(clock)
	since, err := config.ParseWindowEnd(sinceText, now)
	if err != nil {
		return usageError("--since: %v", err)
	}
	until, err := config.ParseWindowEnd(untilText, now)
	if err != nil {
		return usageError("--until: %v", err)
	}
	if !since.Before(until) {
		return usageError("--since (%s) must be before --until (%s)", since.Format(time.RFC3339), until.Format(time.RFC3339))
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
	crash := app.CrashHook(cfg, logger)
	svc := checkout.NewService(pool, provider, checkout.Config{
		Routes:          api.Routes,
		Lease:           cfg.Lease,
		ProviderTimeout: cfg.ProviderTimeout,
		ProviderHorizon: cfg.ProviderHorizon,
		Crash:           crash,
		Now:             clock,
	}, logger)
	defer svc.Close()
	res, err := reconcile.New(pool, provider, svc, app.ReconcileConfig(cfg, clock, crash, false), logger).Run(ctx, since, until)
	if err != nil {
		return err // names the run; what it recorded is on its console page
	}
	fmt.Fprintf(e.stdout, "run %d, %s to %s: %d charges seen, %d orphans found, %d compensations created, %d refunds made, %d amount mismatches, %d paid without charge, %d still completing\n",
		res.RunID, since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), res.ChargesSeen, res.Orphans,
		res.CompensationsCreated, res.RefundsMade, res.Mismatches, res.PaidWithoutCharge, res.Pending)
	return nil
}
