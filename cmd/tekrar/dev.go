package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pglocal"
	"github.com/tekrar/tekrar/migrations"
)

// The demo credentials are fixed so that the README's curl examples work on every laptop.
// They exist only in databases that `tekrar dev` seeded.
const (
	demoClientName     = "demo app"
	demoClientSecret   = "tekrar_sk_demo_local_only"
	demoOperatorEmail  = "demo@tekrar.local"
	demoOperatorPasswd = "demo-password"
)

// dev runs the server on a private Postgres kept in cfg.DevDir, unless DATABASE_URL names
// one. Ctrl-C stops the server first, then that Postgres.
func dev(ctx context.Context, e env, args []string) (err error) {
	cfg, err := config.LoadServer("dev", args, e.getenv, e.stderr)
	if err != nil {
		return err
	}
	logger := app.NewLogger(cfg, e.stderr)
	psqlURL := cfg.DatabaseURL
	if cfg.DatabaseURL == "" {
		started := time.Now()
		pg, err := pglocal.Start(ctx, pglocal.Options{Dir: cfg.DevDir, Port: cfg.DevPGPort})
		if err != nil {
			return err
		}
		defer func() {
			if serr := pg.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("stop postgres: %w", serr)
			}
			logger.Info("private postgres stopped")
		}()
		if err := ensureDatabase(ctx, pg.URL("postgres"), "tekrar"); err != nil {
			return err
		}
		cfg.DatabaseURL = pg.URL("tekrar")
		psqlURL = pg.TCPURL("tekrar")
		logger.Info("private postgres ready", "dir", pg.Dir(), "took", time.Since(started).Round(time.Millisecond).String())
	}
	if err := seedDemo(ctx, cfg); err != nil {
		return err
	}
	ready := func(addr net.Addr) {
		if cfg.Demo {
			go demoTraffic(ctx, "http://"+addr.String(), logger)
		}
		fmt.Fprintf(e.stdout, `
tekrar dev is serving on http://%[1]s
  API:      curl -H 'Authorization: Bearer %[2]s' http://%[1]s/v1/client
  console:  http://%[1]s/admin  (%[3]s / %[4]s)
  health:   http://%[1]s/healthz  http://%[1]s/readyz
  postgres: psql '%[5]s'
Ctrl-C stops the server and its Postgres.

`, addr, demoClientSecret, demoOperatorEmail, demoOperatorPasswd, psqlURL)
	}
	return runServer(ctx, cfg, logger, ready)
}

// ensureDatabase creates the named database on first use of a private server.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	pool, err := db.Open(ctx, adminURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	var exists bool
	if err := pool.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name); err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	if exists {
		return nil
	}
	// The name is a constant of ours, not input; identifiers cannot be bound parameters.
	if _, err := pool.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil && !db.IsUniqueViolation(err, "") {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// seedDemo migrates and adds the demo client and operator if they are missing.
func seedDemo(ctx context.Context, cfg config.Server) error {
	pool, err := db.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrations.Up(ctx, pool.DB); err != nil {
		return err
	}
	if err := clients.CreateIfAbsent(ctx, pool, demoClientName, demoClientSecret); err != nil {
		return err
	}
	if cfg.Demo {
		if err := seedDemoKiosk(ctx, pool); err != nil {
			return err
		}
	}
	var has bool
	if err := pool.GetContext(ctx, &has, `SELECT EXISTS (SELECT 1 FROM operators WHERE email = $1)`, demoOperatorEmail); err != nil {
		return fmt.Errorf("check demo operator: %w", err)
	}
	if has {
		return nil
	}
	if err := admin.SetOperator(ctx, pool, demoOperatorEmail, demoOperatorPasswd, admin.RoleAdmin, admin.PasswordCost); err != nil {
		return errors.Join(errors.New("seed demo operator"), err)
	}
	return nil
}
