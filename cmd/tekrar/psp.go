package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/migrations"
)

// pspCmd: `tekrar psp` runs the sandbox card processor on its own, over HTTP, with its
// ledger in DATABASE_URL; `tekrar serve --psp-url` then talks to it as to a remote
// processor. Its subcommands are the sandbox's dashboard (psp_dashboard.go); a bare
// `tekrar psp` serves.
func pspCmd(e env) *cobra.Command {
	var url, addr string
	var slow, grace time.Duration
	var noCancel, keyLess bool
	var hooks psp.WebhookOptions
	c := command(e, "psp", "run the sandbox payment provider as its own HTTP service", unknownCommand,
		func(s *config.Set) {
			s.DatabaseURL(&url, "Postgres connection string (required)")
			s.Addr(&addr, "addr", "TEKRAR_PSP_ADDR", pspDefaultAddr, "HTTP listen address of the sandbox provider")
			s.Duration(&slow, "slow-delay", "TEKRAR_PSP_SLOW_DELAY", "2s", "how long the tok_slow and tok_late cards take to approve", time.Millisecond, 10*time.Minute)
			s.Bool(&noCancel, "no-cancel", "TEKRAR_PSP_NO_CANCEL", "false", "behave as a processor that cannot cancel a charge key (tekrar then owes a refund of any late charge)")
			s.Bool(&keyLess, "keyless", "TEKRAR_PSP_KEYLESS", "false", "behave as a processor that keeps no keys, as iyzico documents its services: a repeated charge is a new charge, a charge is found by reference only, no key can be canceled (tekrar's recovery finds a charge by reference and never sends it again)")
			s.URL(&hooks.URL, "webhook-url", "TEKRAR_PSP_WEBHOOK_URL", "", "where to send the sandbox's webhooks (a charge made, declined, refunded, disputed); unset: none are sent")
			s.WebhookSecrets(&hooks.Secret, "webhook-secret", "TEKRAR_PSP_WEBHOOK_SECRET", "the webhooks' signing secret, whsec_ and base64 (Standard Webhooks); required with --webhook-url")
			s.Float(&hooks.Duplicate, "webhook-duplicate", "TEKRAR_PSP_WEBHOOK_DUPLICATE", "0", "share of delivered webhooks sent a second time", 0, 1)
			s.Float(&hooks.Delay, "webhook-delay", "TEKRAR_PSP_WEBHOOK_DELAY", "0", "share of webhooks held back before their first delivery, so that they arrive out of order", 0, 1)
			s.Duration(&hooks.DelayFor, "webhook-delay-for", "TEKRAR_PSP_WEBHOOK_DELAY_FOR", "2s", "how long a held-back webhook waits", 0, time.Hour)
			s.Duration(&grace, "shutdown-timeout", "TEKRAR_PSP_SHUTDOWN_TIMEOUT", "10s", "how long in-flight requests may finish after SIGTERM", time.Second, 10*time.Minute)
		},
		func(ctx context.Context, _ []string) error {
			if hooks.URL != "" && hooks.Secret == "" {
				return usageError("--webhook-secret is required with --webhook-url")
			}
			if strings.Contains(hooks.Secret, ",") {
				return usageError("--webhook-secret: one secret, not a list")
			}
			// Bound before the database is opened: a busy port is found at once.
			ln, err := server.Listen(addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			pool, err := connect(ctx, url, 4)
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := migrations.Up(ctx, pool.DB); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			logger := slog.New(slog.NewTextHandler(e.stderr, nil))
			opts := psp.SandboxOptions{SlowDelay: slow, NoCancel: noCancel, KeyLess: keyLess, Logger: logger}
			if hooks.URL != "" {
				opts.Webhooks = &hooks
			}
			sb := psp.NewSandbox(pool, opts)
			go sb.RunWebhooks(ctx)
			h := psp.NewHandler(sb, logger)
			return server.Serve(ctx, ln, endOnStop(ctx, grace/2, h), grace, logger, func(a net.Addr) {
				logger.Info("tekrar psp: sandbox provider serving", "addr", a.String())
			})
		})
	c.AddCommand(pspRefundCmd(e), pspDisputeCmd(e), pspCloseDisputeCmd(e))
	return c
}

// endOnStop cancels the context of a request still running `after` the process was told to
// stop, so that a tok_timeout request (which otherwise waits for its client) cannot hold the
// graceful shutdown until its deadline.
func endOnStop(stop context.Context, after time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		unregister := context.AfterFunc(stop, func() { time.AfterFunc(after, cancel) })
		defer unregister()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
