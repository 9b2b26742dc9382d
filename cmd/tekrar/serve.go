package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/migrations"
)

func serveCmd(e env) *cobra.Command {
	var cfg config.Server
	return command(e, "serve", "run the HTTP server (needs DATABASE_URL)", exactArgs(0),
		func(s *config.Set) { config.BindServer(s, "serve", &cfg) },
		func(ctx context.Context, _ []string) error { return serve(ctx, e, cfg) })
}

func serve(ctx context.Context, e env, cfg config.Server) error {
	if cfg.DatabaseURL == "" {
		return usageError("DATABASE_URL (or --database-url) is required; 'tekrar dev' runs on a private Postgres instead")
	}
	ln, err := server.Listen(cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	logger := app.NewLogger(cfg, e.stderr)
	return runServer(ctx, cfg, ln, logger, nil)
}

// runServer connects, migrates, serves on ln (bound by the caller before it opened anything,
// so that a busy port is found first) until ctx ends, then closes the pool. ready, if not
// nil, is told the bound address.
func runServer(ctx context.Context, cfg config.Server, ln net.Listener, logger *slog.Logger, ready func(net.Addr)) error {
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	pool, err := db.Open(pctx, cfg.DatabaseURL, cfg.DBMaxConns, db.StallTimeout(cfg.DBTimeout))
	cancel()
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrateIfAsked(ctx, cfg); err != nil {
		return err
	}
	a, err := app.New(cfg, pool, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	if cfg.MetricsAddr != "" {
		bound, stop, err := a.Metrics.Listen(cfg.MetricsAddr, logger)
		if err != nil {
			return err
		}
		defer stop()
		logger.Info("metrics serving", "addr", bound.String())
	}
	bgCtx, stopBackground := context.WithCancel(ctx)
	background := make(chan struct{})
	go func() {
		defer close(background)
		a.Run(bgCtx)
	}()
	defer func() {
		stopBackground()
		<-background
	}()
	logger.Info("tekrar serving", "addr", ln.Addr().String())
	return server.Serve(ctx, ln, a.Handler, cfg.ShutdownTimeout, logger, ready)
}

// migrateIfAsked migrates on a pool of its own, without the serving pool's stall timeout:
// a migration may wait for another replica's lock or build an index for minutes.
func migrateIfAsked(ctx context.Context, cfg config.Server) error {
	if !cfg.AutoMigrate {
		return nil
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return fmt.Errorf("auto-migrate: %w", err)
	}
	defer pool.Close()
	if err := migrations.Up(ctx, pool.DB); err != nil {
		return fmt.Errorf("auto-migrate: %w", err)
	}
	return nil
}
