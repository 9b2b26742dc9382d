// Package app assembles a serving tekrar from its parts: the shared HTTP plumbing, the
// mobile API and the console. `tekrar serve`, `tekrar dev` and the end-to-end tests all
// build the same handler here, so what is tested is what runs.
package app

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/completer"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/installments"
	"github.com/tekrar/tekrar/checkout/operator"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/stripe"
	"github.com/tekrar/tekrar/checkout/receipts"
	"github.com/tekrar/tekrar/checkout/reconcile"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/checkout/sweeper"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/metrics"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/problempages"
	"github.com/tekrar/tekrar/internal/schedule"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/static"
)

// App is a configured tekrar: its handler and the background work that goes with it.
type App struct {
	Handler   http.Handler
	Service   *checkout.Service
	Inbox     *inbox.Inbox // the payment provider's webhooks; the console replays its dead letters
	Sweeper   *sweeper.Sweeper
	Completer *completer.Completer
	// Scheduler runs the deployment's periodic tasks (the sweeper, reconciliation,
	// installments, settlement) on River.
	Scheduler *schedule.Scheduler
	// Installments charges the installments that fall due; the scheduler runs its Run.
	Installments *installments.Charger
	// Settler writes the nightly settlements; the scheduler runs its SettleDue.
	Settler *settlement.Settler
	// River dispatches the outbox's events and works the jobs of its consumers and the
	// schedule; Run starts and stops it.
	River *outbox.Client
	// Rescuer takes over a dead process's jobs sooner than River's leader does; Run runs it.
	Rescuer *outbox.Rescuer
	// Metrics are the process's Prometheus metrics; Metrics.Handler serves them.
	Metrics *metrics.Metrics

	// ReplayCache answers replays from memory (TEKRAR_REPLAY_CACHE_BYTES); nil when off.
	// It answers only while Run runs its listener.
	ReplayCache *checkout.ReplayCache

	engine *gin.Engine
	logger *slog.Logger
	db     *sqlx.DB
	dbURL  string
	// closeRead closes the console's read pool, when it has one of its own.
	closeRead func()
}

// Routes lists every route the app serves, for tests that walk them all.
func (a *App) Routes() gin.RoutesInfo { return a.engine.Routes() }

// Option changes what New builds; tests use them to inject a clock.
type Option func(*options)

type options struct {
	now       func() time.Time
	crash     func(string)
	consumers []Consumer
}

// WithCrashHook calls hook at every crash point (see checkout.Config.Crash), for tests that
// stall or stop a worker at an exact step.
func WithCrashHook(hook func(point string)) Option { return func(o *options) { o.crash = hook } }

// WithClock makes the app read time from now instead of the wall clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New wires the routes over db. Close releases what it started.
func New(cfg config.Server, db *sqlx.DB, logger *slog.Logger, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.now == nil {
		o.now = Clock(cfg)
	}
	gin.SetMode(gin.ReleaseMode)
	m := metrics.New(db, logger, cfg.DoubleTapWindow)
	e, err := server.NewEngine(logger, server.TrustedProxies(cfg.TrustedProxies), server.Outermost(m.Middleware()))
	if err != nil {
		return nil, err
	}
	e.GET("/readyz", server.Ready(logger, readyTimeout, server.Writable(db)))
	e.StaticFS("/static", server.Files(static.Files))
	problempages.Register(e)
	var provider psp.Provider
	switch {
	case cfg.Provider == config.ProviderStripe:
		p, err := stripe.New(stripe.Options{SecretKey: cfg.StripeSecretKey.Reveal(), APIBase: cfg.StripeAPIBase,
			HTTPClient: &http.Client{Timeout: 2 * cfg.ProviderTimeout}, Now: o.now})
		if err != nil {
			return nil, fmt.Errorf("TEKRAR_STRIPE_SECRET_KEY: %w", err)
		}
		provider = p
	case cfg.PSPURL != "":
		provider = psp.NewClient(cfg.PSPURL, &http.Client{Timeout: 2 * cfg.ProviderTimeout})
	default:
		provider = psp.NewSandbox(db, psp.SandboxOptions{SlowDelay: cfg.SandboxSlowDelay, Now: o.now, NoCancel: cfg.SandboxNoCancel, KeyLess: cfg.SandboxKeyLess})
	}
	provider = m.Provider(provider)
	if o.crash == nil {
		o.crash = CrashHook(cfg, logger)
	}
	var replays *checkout.ReplayCache
	if cfg.ReplayCacheBytes > 0 {
		replays = checkout.NewReplayCache(checkout.ReplayCacheConfig{Bytes: int64(cfg.ReplayCacheBytes)})
	}
	svc := checkout.NewService(db, provider, checkout.Config{
		Routes:          api.Routes,
		Lease:           cfg.Lease,
		ProviderTimeout: cfg.ProviderTimeout,
		MaxWait:         cfg.MaxWait,
		ProviderHorizon: cfg.ProviderHorizon,
		Now:             o.now,
		Crash:           o.crash,
		ReplayCache:     replays,

		ObserveSales: m.Sales,
	}, logger)
	in := inbox.New(db, svc, inbox.Config{Now: o.now, Crash: o.crash,
		Decoders: map[string]func([]byte) (psp.Event, error){api.StripeProvider: stripe.DecodeEvent}}, logger)
	sealer, err := deliveries.NewSealer(cfg.SecretsKey)
	if err != nil {
		return nil, fmt.Errorf("TEKRAR_SECRETS_KEY: %w", err)
	}
	if sealer == nil {
		logger.Warn("TEKRAR_SECRETS_KEY is not set: client webhook endpoints cannot be created (503 webhook_secrets_key_missing)")
	}
	policy := deliveries.Policy{AllowLoopback: cfg.WebhooksAllowLoopback, Logger: logger}
	endpoints := &deliveries.Store{DB: db, Sealer: sealer, Policy: policy, Now: o.now}
	api.Register(e.Group("/v1"), api.Deps{
		Logger:        logger,
		Authenticator: clients.NewAuthenticator(db, cfg.AuthCacheTTL),
		Service:       svc,
		Catalog:       catalog.New(db, o.now),
		MaxBodyBytes:  int64(cfg.MaxBodyBytes),
		Endpoints:     endpoints,
	})
	if cfg.PSPWebhookSecrets != "" {
		var keys []stdwebhook.Key
		for _, secret := range strings.Split(cfg.PSPWebhookSecrets, ",") {
			k, err := stdwebhook.ParseSecret(strings.TrimSpace(secret))
			if err != nil {
				return nil, fmt.Errorf("TEKRAR_PSP_WEBHOOK_SECRET: %w", err)
			}
			keys = append(keys, k)
		}
		e.POST("/webhooks/psp", api.ProviderInbox(in, keys, logger))
	}
	if cfg.StripeWebhookSecret != "" {
		e.POST("/webhooks/stripe", api.StripeInbox(in, cfg.StripeWebhookSecret.Reveal(), logger))
	}
	var rc *outbox.Client // made below, once every consumer is known
	inFlight := deliveries.InFlight{Endpoint: cfg.WebhookEndpointInFlight, Client: cfg.WebhookClientInFlight}
	deliverer := &deliveries.Deliverer{DB: db, Sealer: sealer, Logger: logger,
		Client: deliveries.NewHTTPClient(policy, deliveries.AttemptTimeout), Now: o.now, FirstRetry: cfg.WebhookRetryBase,
		Observe: m.Delivery, InFlight: inFlight}
	notices := &deliveries.NoticeWorker{DB: db, From: cfg.SMTPFrom, Logger: logger.With("component", "webhooks")}
	if cfg.SMTP.Configured() {
		notices.Mailer = &receipts.Mailer{Server: cfg.SMTP, From: cfg.SMTPFrom}
	}
	outgoing := Consumer{ // client webhooks: the fan-out, and the delivery jobs on their own queue
		Handler: deliveries.Handler{InFlight: inFlight},
		AddWorkers: func(w *river.Workers) {
			deliveries.AddWorkers(w, deliverer)
			deliveries.AddNoticeWorker(w, notices)
		},
		Queues: map[string]river.QueueConfig{deliveries.Queue: {MaxWorkers: 20}},
	}
	sweepCfg := SweepConfig(cfg, o.now)
	sweepCfg.Observe = m.Sweep
	sw := sweeper.New(db, sweepCfg, logger)
	instCfg := InstallmentsConfig(cfg, o.now, o.crash)
	instCfg.Observe = m.Installments
	charger := installments.New(db, provider, instCfg, logger)
	settler := settlement.New(db, settlement.Config{Now: o.now, Observe: m.Settlement}, logger)
	// The reconciler of serve's schedule: its runs are recorded as scheduled.
	reconciler := reconcile.New(db, provider, svc, ReconcileConfig(cfg, o.now, o.crash, true), logger)
	sched, err := newScheduler(cfg, db.DB, charger, sw, settler, reconciler, o.now, logger, m.ScheduledRun)
	if err != nil {
		return nil, err
	}
	m.ScheduledTasks(taskNames(sched))
	read, closeRead, err := openReader(cfg, db)
	if err != nil {
		return nil, err
	}
	consoleNotFound := admin.Register(e.Group("/admin"), admin.Deps{DB: db, Read: read, Logger: logger, SecureCookies: cfg.SecureCookies, Now: o.now,
		DoubleTapWindow: cfg.DoubleTapWindow, Service: svc, Operator: operator.New(db, svc), Inbox: in, Tasks: sched.Tasks(),
		Redeliver: func(ctx context.Context, tx *sql.Tx, id int64, nonce string) error {
			return deliveries.Redeliver(ctx, tx, rc.Client, id, nonce)
		},
		Resend: endpoints.ResendTx})
	comp := completer.New(db, svc, completer.Config{
		Interval:       cfg.CompleterInterval,
		Grace:          cfg.CompleterGrace,
		AttentionAfter: cfg.AttentionAfter,
	}, logger)
	m.Completer(comp.Totals)
	if replays != nil {
		m.ReplayCache(replays)
	}
	e.GET("/readyz/completer", func(c *gin.Context) { c.JSON(http.StatusOK, comp.Totals()) })
	e.NoRoute(notFound(consoleNotFound))
	rc, err = newRiver(cfg, db.DB, logger, m, append(append(consumers(cfg, db.DB, logger, m, o.now), outgoing, scheduleConsumer(sched)), o.consumers...))
	if err != nil {
		closeRead()
		return nil, err
	}
	endpoints.Jobs = rc.Client // a resend queues its deliveries' jobs
	deliverer.Jobs = rc.Client // a disabling queues its notice
	return &App{Handler: server.HeadAsGet(e), Service: svc, Inbox: in, Sweeper: sw, Completer: comp,
		Scheduler: sched, Installments: charger, Settler: settler, River: rc, Metrics: m,
		Rescuer: outbox.NewRescuer(db.DB, cfg.OutboxRescueAfter, logger.With("component", "river")), ReplayCache: replays,
		engine: e, logger: logger, db: db, dbURL: cfg.DatabaseURL, closeRead: closeRead}, nil
}

// readyTimeout is how long /readyz waits for the database to say it takes writes.
const readyTimeout = 2 * time.Second

// notFound answers a path no route has: a browser asking for a console page gets the
// console's own not-found page, a browser at / is sent to the console, and everything else
// (the API, scripts) gets problem JSON.
func notFound(console gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		path := c.Request.URL.Path
		html := wantsHTML(c.Request)
		switch {
		case html && (path == "/admin" || strings.HasPrefix(path, "/admin/")):
			console(c)
		case html && path == "/" && c.Request.Method == http.MethodGet:
			c.Redirect(http.StatusSeeOther, "/admin/")
		default:
			server.Abort(c, problem.NotFound())
		}
	}
}

// wantsHTML reports whether the client prefers an HTML page to JSON, as a browser's Accept
// does: text/html named before any JSON type.
func wantsHTML(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	h := strings.Index(accept, "text/html")
	if h < 0 {
		return false
	}
	j := strings.Index(accept, "json")
	return j < 0 || h < j
}

// Run does the app's background work until ctx ends, and returns once River has stopped:
// River works the outbox's jobs and the scheduled tasks (sweeping, reconciling with the
// provider), the rescuer takes over the jobs of dead processes, the completer completes
// abandoned keys in every process, and the replay cache's listener keeps it honest (the
// cache answers nothing without it).
func (a *App) Run(ctx context.Context) {
	var wg sync.WaitGroup
	events, unsubscribe := a.River.Subscribe(metrics.JobEvents...)
	defer unsubscribe()
	if a.ReplayCache != nil && a.dbURL != "" {
		wg.Add(1)
		go func() { defer wg.Done(); a.ReplayCache.Listen(ctx, a.dbURL, a.db, a.logger) }()
	}
	wg.Add(4)
	go func() { defer wg.Done(); a.Metrics.Jobs(ctx, events) }()
	go func() { defer wg.Done(); runRiver(ctx, a.River, a.logger) }()
	go func() { defer wg.Done(); a.Rescuer.Run(ctx) }()
	go func() { defer wg.Done(); a.Completer.Run(ctx) }()
	wg.Wait()
}

// CrashHook arms the crash harness's fault points: the process exits, as abruptly as a
// kill, at an armed point. Nil unless TEKRAR_CRASH_AT is set.
func CrashHook(cfg config.Server, logger *slog.Logger) func(string) {
	if len(cfg.CrashAt) == 0 {
		return nil
	}
	return func(point string) {
		if slices.Contains(cfg.CrashAt, point) && rand.Float64() < cfg.CrashRate {
			logger.Warn("crash point reached: exiting", "point", point)
			os.Exit(3)
		}
	}
}

// Clock is the process's clock: nil (the wall clock) unless TEKRAR_CLOCK_SHIFT moves it.
func Clock(cfg config.Server) func() time.Time {
	if cfg.ClockShift == 0 {
		return nil
	}
	return func() time.Time { return time.Now().Add(cfg.ClockShift) }
}

// Now reads clock, or the wall clock when it is nil.
func Now(clock func() time.Time) time.Time {
	if clock == nil {
		return time.Now()
	}
	return clock()
}

// SweepConfig is the sweeper's part of the configuration.
func SweepConfig(cfg config.Server, now func() time.Time) sweeper.Config {
	return sweeper.Config{
		Batch:          cfg.SweepBatch,
		Pause:          cfg.SweepPause,
		Settle:         cfg.SweepSettle,
		EventRetention: cfg.EventRetention,
		Now:            now,
	}
}

// ReconcileConfig is reconciliation's Config from the server's settings: scheduled marks
// the runs of serve's schedule (`tekrar reconcile`'s are not), crash is the process's crash
// hook (CrashHook).
func ReconcileConfig(cfg config.Server, now func() time.Time, crash func(point string), scheduled bool) reconcile.Config {
	return reconcile.Config{
		Scheduled:       scheduled,
		ProviderTimeout: cfg.ProviderTimeout,
		ProviderHorizon: cfg.ProviderHorizon,
		Crash:           crash,
		Now:             now,
	}
}

// InstallmentsConfig is the installment runs' Config from the server's settings (the same
// lease and provider timeout as checkout's keys); crash is the process's crash hook
// (CrashHook).
func InstallmentsConfig(cfg config.Server, now func() time.Time, crash func(point string)) installments.Config {
	return installments.Config{
		Lease:           cfg.Lease,
		ProviderTimeout: cfg.ProviderTimeout,
		Crash:           crash,
		Now:             now,
	}
}

// Close stops the app's background work; call it after the HTTP server has stopped.
func (a *App) Close() {
	a.Inbox.Close()
	a.Service.Close()
	if a.closeRead != nil {
		a.closeRead()
	}
}

// NewLogger returns the process logger: JSON for machines, text for people.
func NewLogger(cfg config.Server, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
