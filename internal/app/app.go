// Package app assembles a serving tekrar from its parts: the shared HTTP plumbing, the
// mobile API and the console. `tekrar serve`, `tekrar dev` and the end-to-end tests all
// build the same handler here, so what is tested is what runs.
package app

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/server"
)

// App is a configured tekrar: its handler and the background work that goes with it.
type App struct {
	Handler http.Handler
	Service *checkout.Service
	Sweeper *checkout.Sweeper
}

// Option changes what New builds; tests use them to inject a clock.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock makes the app read time from now instead of the wall clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New wires the routes over db. Close releases what it started.
func New(cfg config.Server, db *sqlx.DB, logger *slog.Logger, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	e, err := server.NewEngine(logger, db, cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	var provider psp.Provider
	if cfg.PSPURL != "" {
		provider = psp.NewClient(cfg.PSPURL, &http.Client{Timeout: 2 * cfg.ProviderTimeout})
	} else {
		provider = psp.NewSandbox(db, psp.SandboxOptions{SlowDelay: cfg.SandboxSlowDelay, Now: o.now})
	}
	svc := checkout.NewService(db, provider, checkout.Config{
		Lease:           cfg.Lease,
		ProviderTimeout: cfg.ProviderTimeout,
		MaxWait:         cfg.MaxWait,
		Now:             o.now,
	}, logger)
	api.Register(e.Group("/v1"), api.Deps{
		Logger:        logger,
		Authenticator: clients.NewAuthenticator(db, cfg.AuthCacheTTL),
		Service:       svc,
		MaxBodyBytes:  int64(cfg.MaxBodyBytes),
	})
	sweeper := checkout.NewSweeper(db, SweepConfig(cfg, o.now), logger)
	return &App{Handler: e, Service: svc, Sweeper: sweeper}, nil
}

// SweepConfig is the sweeper's part of the configuration.
func SweepConfig(cfg config.Server, now func() time.Time) checkout.SweepConfig {
	return checkout.SweepConfig{
		Interval:       cfg.SweepInterval,
		Batch:          cfg.SweepBatch,
		Pause:          cfg.SweepPause,
		EventRetention: cfg.EventRetention,
		Now:            now,
	}
}

// Close stops the app's background work; call it after the HTTP server has stopped.
func (a *App) Close() { a.Service.Close() }

// NewLogger returns the process logger: JSON for machines, text for people.
func NewLogger(cfg config.Server, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
