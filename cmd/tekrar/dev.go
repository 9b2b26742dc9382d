package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pglocal"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/migrations"
)

// The demo credentials are fixed so that the README's curl examples work on every laptop,
// which makes them public: anyone who reads the README can use them. They exist only in
// databases that `tekrar dev` seeded, and dev seeds a database named by DATABASE_URL only
// when it holds no clients or operators of its own (see refuseSharedDatabase), so that a
// dev run cannot open a database that serves real clients to everyone.
const (
	demoClientName     = "demo app"
	demoClientSecret   = "tekrar_sk_demo_local_only"
	demoOperatorEmail  = "demo@tekrar.local"
	demoOperatorPasswd = "demo-password"
)

// dev runs the server on a private Postgres kept in cfg.DevDir, unless DATABASE_URL names
// one. Ctrl-C stops the server first, then that Postgres.
func devCmd(e env) *cobra.Command {
	var cfg config.Server
	c := command(e, "dev", "run the server on a private Postgres started for you", exactArgs(0),
		func(s *config.Set) { config.BindServer(s, "dev", &cfg) },
		func(ctx context.Context, _ []string) error { return dev(ctx, e, cfg) })
	c.AddCommand(devResetCmd(e))
	return c
}

// devResetCmd: `tekrar dev reset` deletes the private Postgres's directory, so that the next
// `tekrar dev` starts on an empty database, created, migrated and seeded anew.
func devResetCmd(e env) *cobra.Command {
	var dir string
	return command(e, "reset", "delete the private Postgres's data (stop tekrar dev first); the next dev starts empty", exactArgs(0),
		func(s *config.Set) { config.BindDevDir(s, &dir) },
		func(context.Context, []string) error {
			removed, err := pglocal.Remove(dir)
			if err != nil {
				return err
			}
			if !removed {
				fmt.Fprintf(e.stdout, "nothing to reset: %s does not exist\n", dir)
				return nil
			}
			fmt.Fprintf(e.stdout, "removed %s; the next tekrar dev starts on an empty database\n", dir)
			return nil
		})
}

func dev(ctx context.Context, e env, cfg config.Server) (err error) {
	// Bound first: a busy port stops dev before it starts a Postgres or touches a database.
	ln, err := server.Listen(cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	logger := app.NewLogger(cfg, e.stderr)
	psqlURL := ""
	private := cfg.DatabaseURL == ""
	if private {
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
	if cfg.SecretsKey == "" {
		if cfg.SecretsKey, err = devSecretsKey(cfg.DevDir); err != nil {
			return err
		}
	}
	if err := seedDemo(ctx, cfg, private); err != nil {
		return err
	}
	ready := func(addr net.Addr) {
		if cfg.Demo {
			go demoTraffic(ctx, "http://"+addr.String(), logger)
		}
		fmt.Fprint(e.stdout, devBanner(addr.String(), psqlURL))
	}
	return runServer(ctx, cfg, ln, logger, ready)
}

// devBanner is what dev prints once it serves on addr. psqlURL is the private Postgres's
// (empty: dev runs on DATABASE_URL's database, which it did not start, does not stop, and
// whose URL, which may hold a password, it does not repeat).
func devBanner(addr, psqlURL string) string {
	pg, stop := "postgres: psql '"+psqlURL+"'", "Ctrl-C stops the server and its Postgres."
	if psqlURL == "" {
		pg, stop = "postgres: DATABASE_URL's (not started by dev)", "Ctrl-C stops the server; DATABASE_URL's Postgres keeps running."
	}
	return fmt.Sprintf(`
tekrar dev is serving on http://%[1]s
  API:      curl -H 'Authorization: Bearer %[2]s' http://%[1]s/v1/client
  console:  http://%[1]s/admin  (%[3]s / %[4]s)
  health:   http://%[1]s/healthz  http://%[1]s/readyz
  %[5]s
%[6]s

`, addr, demoClientSecret, demoOperatorEmail, demoOperatorPasswd, pg, stop)
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

// seedDemo migrates and adds the demo client and operator if they are missing. A database
// that is not dev's private one is checked first, and refused, before anything is written.
func seedDemo(ctx context.Context, cfg config.Server, private bool) error {
	pool, err := db.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	if !private {
		if err := refuseSharedDatabase(ctx, pool); err != nil {
			return err
		}
	}
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

// refuseSharedDatabase refuses a database that has clients or operators other than the demo
// ones: seeding the public demo secret and login there would let anyone call its API and
// open its console, under dev and under every later serve. A database that has none (new,
// or seeded by an earlier dev run) is dev's to use. It reads only, and runs before the
// migrations, so that a refused database is left exactly as it was.
func refuseSharedDatabase(ctx context.Context, pool *sqlx.DB) error {
	var tables bool
	err := pool.GetContext(ctx, &tables,
		`SELECT to_regclass('clients') IS NOT NULL AND to_regclass('operators') IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	if !tables {
		return nil // not migrated yet: nobody's data is in it
	}
	client, kiosk := clients.Hash(demoClientSecret), clients.Hash(demoKioskSecret)
	var others struct {
		Clients   int64 `db:"clients"`
		Operators int64 `db:"operators"`
	}
	err = pool.GetContext(ctx, &others, `
		SELECT (SELECT count(*) FROM clients WHERE secret_hash NOT IN ($1, $2)) AS clients,
		       (SELECT count(*) FROM operators WHERE email <> $3) AS operators`,
		client[:], kiosk[:], demoOperatorEmail)
	if err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	if others.Clients > 0 || others.Operators > 0 {
		return fmt.Errorf("refusing to seed the public demo credentials into DATABASE_URL's database: "+
			"it has %d clients and %d operators of its own; tekrar dev seeds only a database without any "+
			"(unset DATABASE_URL to use the private Postgres, or run 'tekrar serve' for this one)",
			others.Clients, others.Operators)
	}
	return nil
}

// devSecretsKey returns the key dev encrypts webhook endpoint secrets under: made once,
// kept (mode 0600) in the dev directory beside the database whose secrets it opens, so that
// endpoints keep working across restarts; `dev reset` deletes it with the database.
func devSecretsKey(dir string) (string, error) {
	path := filepath.Join(dir, "secrets.key")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("dev secrets key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("dev secrets key: %w", err)
	}
	key := deliveries.NewSecretsKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return devSecretsKey(dir) // another dev made it first
	}
	if err != nil {
		return "", fmt.Errorf("dev secrets key: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("dev secrets key: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("dev secrets key: %w", err)
	}
	return key, nil
}
