package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"
)

// Server is the configuration of `tekrar serve` and `tekrar dev`.
type Server struct {
	DatabaseURL string
	Addr        string
	// MetricsAddr is where Prometheus metrics are served (/metrics); empty: not served.
	MetricsAddr     string
	LogFormat       string
	LogLevel        slog.Level
	ShutdownTimeout time.Duration
	DBMaxConns      int
	DBTimeout       time.Duration
	AutoMigrate     bool
	AuthCacheTTL    time.Duration
	PSPURL          string
	// Provider is the payment provider that charges: ProviderSandbox (the in-process
	// sandbox, or the one at PSPURL) or ProviderStripe.
	Provider string
	// Stripe: its API's base URL (a stripe-mock in tests and the demo), the account's secret
	// key and the webhook endpoint's signing secret (unset: POST /webhooks/stripe is not
	// served).
	StripeAPIBase       string
	StripeSecretKey     Secret
	StripeWebhookSecret Secret
	// PSPWebhookSecrets are the provider webhooks' signing secrets, comma-separated (two
	// during a rotation); empty: POST /webhooks/psp is not served.
	PSPWebhookSecrets string
	MaxBodyBytes      int
	// ReplayCacheBytes bounds each process's cache of completed answers (0: no cache;
	// docs/performance.md, "Replays from memory").
	ReplayCacheBytes int
	TrustedProxies   []string
	SecureCookies    bool
	// DoubleTapWindow is how far apart two paid orders of one customer, amount and items
	// may be for the console to flag them as a suspected double tap.
	DoubleTapWindow time.Duration
	// SecretsKey encrypts webhook endpoints' signing secrets at rest (base64 of 32 bytes);
	// empty: endpoints cannot be created. dev keeps one in its data directory.
	SecretsKey string
	// WebhooksAllowLoopback lets endpoints be http and on loopback addresses (dev).
	WebhooksAllowLoopback bool
	// WebhookRetryBase is the first delay of the delivery retry schedule; each next one is
	// twice as long. Production keeps the default; process tests shorten it.
	WebhookRetryBase time.Duration
	// WebhookEndpointInFlight and WebhookClientInFlight bound the delivery attempts in
	// flight at once, across every process, per endpoint and per client
	// (docs/webhooks-out.md "Fairness").
	WebhookEndpointInFlight int
	WebhookClientInFlight   int

	// Receipts: the SMTP server they are sent through (zero: kept for the console) and
	// their From address.
	SMTP     SMTPServer
	SMTPFrom string
	// ReceiptsPerMinute and ReceiptsPerDay bound each client's receipts in a minute and in a
	// UTC day; one over either is stored refused, not sent (docs/receipts.md).
	ReceiptsPerMinute int
	ReceiptsPerDay    int

	// The checkout engine.
	Lease            time.Duration
	ProviderTimeout  time.Duration
	MaxWait          time.Duration
	ProviderHorizon  time.Duration
	SandboxSlowDelay time.Duration
	SandboxNoCancel  bool
	SandboxKeyLess   bool

	// Key lifecycle.
	SweepInterval  time.Duration
	SweepBatch     int
	SweepPause     time.Duration
	SweepSettle    time.Duration
	EventRetention time.Duration

	// The outbox: how many outbox jobs a process runs at once, and how often it polls.
	OutboxWorkers     int
	OutboxPoll        time.Duration
	OutboxRescueAfter time.Duration

	// Crash recovery.
	CompleterInterval time.Duration
	CompleterGrace    time.Duration
	AttentionAfter    time.Duration

	// Reconciliation: every ReconcileEvery (0: never) one process reconciles the last
	// ReconcileWindow of the provider's charges.
	ReconcileEvery  time.Duration
	ReconcileWindow time.Duration
	// CrashAt and CrashRate arm the crash harness's fault points; testing only.
	CrashAt   []string
	CrashRate float64
	// ClockShift moves the process's clock away from the wall clock, so that a test can play
	// out days other than today with real processes; testing only.
	ClockShift time.Duration

	// ReadDatabaseURL is where the console's and the reports' read-only pages read (a
	// standby); empty: DATABASE_URL. Nothing that writes, or reads in order to write, uses it.
	ReadDatabaseURL string

	// Dev only: where the private Postgres keeps its data and which TCP port it opens.
	DevDir    string
	DevPGPort int
	Demo      bool
}

// LoadServer parses the settings of the serve or dev command from args, stand-alone (the
// tekrar binary binds the same settings to its cobra commands with BindServer).
func LoadServer(command string, args []string, getenv func(string) string, output io.Writer) (Server, error) {
	var c Server
	s := NewSet(command, getenv, output)
	BindServer(s, command, &c)
	if err := s.Parse(args); err != nil {
		return c, err
	}
	return c, nil
}

// BindServer registers the settings of serve (command "serve") or dev (command "dev") on s,
// to be stored in c. Defaults differ only where a developer's laptop and a production host
// want different things (log format, bind address).
func BindServer(s *Set, command string, c *Server) {
	dev := command == "dev"
	addr, format := ":8080", "json"
	if dev {
		addr, format = "127.0.0.1:8080", "text"
	}
	s.DatabaseURL(&c.DatabaseURL, "Postgres connection string"+map[bool]string{true: "; unset: start a private Postgres", false: " (required)"}[dev])
	s.ReadDatabaseURL(&c.ReadDatabaseURL)
	s.Addr(&c.Addr, "addr", "TEKRAR_ADDR", addr, "HTTP listen address")
	s.Addr(&c.MetricsAddr, "metrics-addr", "TEKRAR_METRICS_ADDR", "", "listen address of the Prometheus metrics (/metrics), apart from the API so that it need not face the internet (e.g. 127.0.0.1:9464); unset: not served")
	bindLog(s, c, format)
	s.Duration(&c.ShutdownTimeout, "shutdown-timeout", "TEKRAR_SHUTDOWN_TIMEOUT", "15s", "how long in-flight requests may finish after SIGTERM", 0, 10*time.Minute)
	s.Int(&c.DBMaxConns, "db-max-conns", "TEKRAR_DB_MAX_CONNS", "32", "most open Postgres connections", 2, 1000)
	s.Duration(&c.DBTimeout, "db-timeout", "TEKRAR_DB_TIMEOUT", "5s", "longest a database call waits for Postgres to answer; past it the request fails closed with 503 store_unavailable", 100*time.Millisecond, 10*time.Minute)
	s.Bool(&c.AutoMigrate, "auto-migrate", "TEKRAR_AUTO_MIGRATE", "true", "apply pending migrations at start (safe with many replicas: a Postgres lock serialises them)")
	s.Duration(&c.AuthCacheTTL, "auth-cache-ttl", "TEKRAR_AUTH_CACHE_TTL", "30s", "how long a client secret lookup is cached (a disabled client is refused after at most this)", 0, time.Hour)
	s.WebhookSecrets(&c.PSPWebhookSecrets, "psp-webhook-secret", "TEKRAR_PSP_WEBHOOK_SECRET", "the payment provider's webhook signing secret (whsec_...; two, comma-separated, during a rotation); unset: POST /webhooks/psp is not served")
	s.URL(&c.PSPURL, "psp-url", "TEKRAR_PSP_URL", "", "payment provider base URL (a 'tekrar psp' process); unset: the sandbox provider runs in-process")
	bindStripe(s, c)
	s.Bool(&c.SecureCookies, "secure-cookies", "TEKRAR_SECURE_COOKIES", "false", "mark console cookies Secure even on plain HTTP (TLS ends at a proxy in front); they are Secure on TLS anyway")
	s.Duration(&c.DoubleTapWindow, "double-tap-window", "TEKRAR_DOUBLE_TAP_WINDOW", "2m", "console: how far apart two paid orders of one customer with the same amount and items are flagged as a suspected double tap", time.Second, 24*time.Hour)
	s.SecretsKey(&c.SecretsKey, "secrets-key", "TEKRAR_SECRETS_KEY", "key that webhook endpoints' signing secrets are encrypted under (base64 of 32 random bytes: openssl rand -base64 32)"+map[bool]string{true: "; unset: made once and kept in the dev directory", false: "; unset: webhook endpoints cannot be created"}[dev])
	s.Bool(&c.WebhooksAllowLoopback, "webhooks-allow-loopback", "TEKRAR_WEBHOOKS_ALLOW_LOOPBACK", map[bool]string{true: "true", false: "false"}[dev], "client webhook endpoints may be http and on loopback addresses (a receiver on this machine); never in production")
	s.Duration(&c.WebhookRetryBase, "webhook-retry-base", "TEKRAR_WEBHOOK_RETRY_BASE", "30s", "delay before the first retry of a failed client webhook delivery; each next retry waits twice as long (up to 6h), until the 72h horizon", 10*time.Millisecond, time.Hour)
	s.Int(&c.WebhookEndpointInFlight, "webhook-endpoint-in-flight", "TEKRAR_WEBHOOK_ENDPOINT_IN_FLIGHT", "2", "most delivery attempts at once to one client webhook endpoint, across every process; more wait their turn", 1, 1000)
	s.Int(&c.WebhookClientInFlight, "webhook-client-in-flight", "TEKRAR_WEBHOOK_CLIENT_IN_FLIGHT", "5", "most delivery attempts at once of one client's webhooks, across every process, so that its slow endpoints never hold up another client's; raise it with the fleet for clients of many events", 1, 10000)
	s.CIDRs(&c.TrustedProxies, "trusted-proxies", "TEKRAR_TRUSTED_PROXIES", "comma-separated CIDRs of proxies whose X-Forwarded-For is believed for the client address in key history")
	s.SMTPURL(&c.SMTP, "smtp-url", "TEKRAR_SMTP_URL", "SMTP server for receipts: smtp://user:pass@host:port (STARTTLS when offered) or smtps://...; unset: receipts are kept for the console, not sent")
	s.MailAddress(&c.SMTPFrom, "smtp-from", "TEKRAR_SMTP_FROM", "tekrar <receipts@localhost>", "From address of receipts; its domain ends their Message-IDs")
	s.Int(&c.ReceiptsPerMinute, "receipts-per-minute", "TEKRAR_RECEIPTS_PER_MINUTE", "600", "most receipts of one client in a minute; more are stored refused (rate_limited), not sent, and the sale goes on", 1, 1_000_000)
	s.Int(&c.ReceiptsPerDay, "receipts-per-day", "TEKRAR_RECEIPTS_PER_DAY", "10000", "most receipts of one client in a UTC day; more are stored refused (daily_cap), not sent, and the sale goes on", 1, 100_000_000)
	s.Int(&c.MaxBodyBytes, "max-body-bytes", "TEKRAR_MAX_BODY_BYTES", "65536", "largest request body accepted; larger gets 413", 1024, 10<<20)
	s.Int(&c.ReplayCacheBytes, "replay-cache-bytes", "TEKRAR_REPLAY_CACHE_BYTES", "67108864", "bytes of completed answers each process keeps in memory to answer replays without a database read; 0 turns the cache off", 0, 1<<40)
	s.Duration(&c.Lease, "lease", "TEKRAR_LEASE", "30s", "how long a worker holds an idempotency key before a retry may take it over", time.Second, time.Hour)
	s.Duration(&c.ProviderTimeout, "provider-timeout", "TEKRAR_PROVIDER_TIMEOUT", "10s", "longest wait for one payment provider call; past it the outcome is unknown (503 payment_pending)", 10*time.Millisecond, 5*time.Minute)
	s.Duration(&c.ProviderHorizon, "provider-horizon", "TEKRAR_PROVIDER_HORIZON", "24h", "after tekrar gives up on a charge at a provider that cannot cancel a charge key, how long a late charge under it is watched for and refunded", time.Second, 90*24*time.Hour)
	s.Duration(&c.MaxWait, "max-wait", "TEKRAR_MAX_WAIT", "10s", "cap on 'Prefer: wait=N' for a request whose key is in flight", 0, time.Minute)
	s.Bool(&c.SandboxNoCancel, "sandbox-no-cancel", "TEKRAR_SANDBOX_NO_CANCEL", "false", "the in-process sandbox provider behaves as a processor that cannot cancel a charge key")
	s.Bool(&c.SandboxKeyLess, "sandbox-keyless", "TEKRAR_SANDBOX_KEYLESS", "false", "the in-process sandbox provider keeps no keys, as iyzico documents its services: a repeated charge is a new charge, a charge is found by reference only, and no key can be canceled (tekrar's recovery finds a charge by reference and never sends it again: docs/providers.md)")
	s.Duration(&c.SandboxSlowDelay, "sandbox-slow-delay", "TEKRAR_SANDBOX_SLOW_DELAY", "2s", "how long the in-process sandbox provider takes for tok_slow", 0, time.Minute)
	s.Duration(&c.SweepInterval, "sweep-interval", "TEKRAR_SWEEP_INTERVAL", "1m", "how often the scheduled task \"sweep\" expires keys (one process of the deployment per tick; see docs/scheduled.md)", time.Second, 24*time.Hour)
	bindSweep(s, c)
	s.Int(&c.OutboxWorkers, "outbox-workers", "TEKRAR_OUTBOX_WORKERS", "10", "how many batches of outbox events each process dispatches at once (each holds a pooled connection while it runs)", 1, 1000)
	s.Duration(&c.OutboxPoll, "outbox-poll", "TEKRAR_OUTBOX_POLL", "1s", "how often an idle process looks for new outbox events and jobs: the longest an event waits before it is dispatched", 10*time.Millisecond, time.Minute)
	s.Duration(&c.OutboxRescueAfter, "outbox-rescue-after", "TEKRAR_OUTBOX_RESCUE_AFTER", "1m", "how long a job may be running before it is taken as lost with its process and run again elsewhere (jobs time out at half of it, and a dispatch of outbox events stalled for half of it is ended by Postgres)", time.Second, 24*time.Hour)
	s.Duration(&c.CompleterInterval, "completer-interval", "TEKRAR_COMPLETER_INTERVAL", "10s", "how often each process looks for abandoned keys to complete", 100*time.Millisecond, time.Hour)
	s.Duration(&c.CompleterGrace, "completer-grace", "TEKRAR_COMPLETER_GRACE", "1m", "how long after a key's lease lapsed the client keeps the first chance to retry before the completer settles it", time.Millisecond, 24*time.Hour)
	s.Duration(&c.AttentionAfter, "attention-after", "TEKRAR_ATTENTION_AFTER", "1h", "how long a key whose payment outcome cannot be learnt waits before it is handed to an operator", time.Second, 30*24*time.Hour)
	s.Duration(&c.ReconcileEvery, "reconcile-every", "TEKRAR_RECONCILE_EVERY", "1h", "how often the scheduled task \"reconcile\" reconciles the payment provider's charges with the orders (one process per tick; 0: never; see tekrar reconcile)", 0, 7*24*time.Hour)
	bindReconcileWindow(s, c)
	bindCrash(s, c)
	if dev {
		BindDevDir(s, &c.DevDir)
		s.Int(&c.DevPGPort, "dev-pg-port", "TEKRAR_DEV_PG_PORT", "54329", "127.0.0.1 port of the private Postgres, for psql and load tools", 1024, 65535)
		s.Bool(&c.Demo, "demo", "TEKRAR_DEMO", "false", "fill the console with demo traffic")
	}
}

// BindReconcile registers what a one-shot `tekrar reconcile` uses: the database, the log,
// the provider and the engine's settings that driving a refund reads, with the same names
// and defaults as serve's. since and until are the window's ends as written (see
// ParseWindowEnd).
func BindReconcile(s *Set, c *Server, since, until *string) {
	s.DatabaseURL(&c.DatabaseURL, "Postgres connection string (required)")
	bindLog(s, c, "json")
	s.URL(&c.PSPURL, "psp-url", "TEKRAR_PSP_URL", "", "payment provider base URL (a 'tekrar psp' process); unset: the sandbox provider's ledger in this database")
	s.Duration(&c.ProviderTimeout, "provider-timeout", "TEKRAR_PROVIDER_TIMEOUT", "10s", "longest wait for one payment provider call", 10*time.Millisecond, 5*time.Minute)
	s.Duration(&c.ProviderHorizon, "provider-horizon", "TEKRAR_PROVIDER_HORIZON", "24h", "how long a compensation watches for its charge", time.Second, 90*24*time.Hour)
	s.Duration(&c.Lease, "lease", "TEKRAR_LEASE", "30s", "how long a compensation taken by this run is held before another process may drive it", time.Second, time.Hour)
	s.String(since, "since", "TEKRAR_RECONCILE_SINCE", "24h", "the window's start: a duration before now (24h, 2d) or an RFC 3339 time")
	s.String(until, "until", "TEKRAR_RECONCILE_UNTIL", "now", "the window's end: now, a duration before now, or an RFC 3339 time")
	bindCrash(s, c)
}

// BindInstallments registers what a one-shot `tekrar installments run` uses: the database,
// the log, the provider and the instant the run charges what is due at.
func BindInstallments(s *Set, c *Server, at *string) {
	s.DatabaseURL(&c.DatabaseURL, "Postgres connection string (required)")
	bindLog(s, c, "json")
	s.URL(&c.PSPURL, "psp-url", "TEKRAR_PSP_URL", "", "payment provider base URL (a 'tekrar psp' process); unset: the sandbox provider's ledger in this database")
	s.Duration(&c.ProviderTimeout, "provider-timeout", "TEKRAR_PROVIDER_TIMEOUT", "10s", "longest wait for one payment provider call", 10*time.Millisecond, 5*time.Minute)
	s.Duration(&c.Lease, "lease", "TEKRAR_LEASE", "30s", "how long an installment taken by this run is held before another process may charge it", time.Second, time.Hour)
	s.String(at, "at", "TEKRAR_INSTALLMENTS_AT", "now", "charge what is due at this instant: now or an RFC 3339 time")
	bindCrash(s, c)
}

// BindSettle registers what `tekrar settle` uses: the database, the log, the day to settle
// (YYYY-MM-DD, required) and the client (0: every client).
func BindSettle(s *Set, c *Server, date *string, client *int) {
	s.DatabaseURL(&c.DatabaseURL, "Postgres connection string (required)")
	bindLog(s, c, "json")
	s.String(date, "date", "TEKRAR_SETTLE_DATE", "", "the business day to settle, YYYY-MM-DD, in each client's time zone (required)")
	s.Int(client, "client", "TEKRAR_SETTLE_CLIENT", "0", "the client to settle; 0 settles every client", 0, math.MaxInt)
}

// Payment providers of --provider.
const (
	ProviderSandbox = "sandbox"
	ProviderStripe  = "stripe"
)

// StripeAPIBaseDefault is Stripe's API.
const StripeAPIBaseDefault = "https://api.stripe.com"

// bindStripe registers the choice of provider and Stripe's settings; the secret key is
// required with --provider stripe.
func bindStripe(s *Set, c *Server) {
	s.Choice(&c.Provider, "provider", "TEKRAR_PROVIDER", ProviderSandbox, "the payment provider that charges: sandbox (in-process, or at --psp-url) or stripe (docs/providers.md, The Stripe provider)", ProviderSandbox, ProviderStripe)
	s.URL(&c.StripeAPIBase, "stripe-api-base", "TEKRAR_STRIPE_API_BASE", StripeAPIBaseDefault, "base URL of Stripe's API with --provider stripe (a stripe-mock's, e.g. http://127.0.0.1:12111, for tests and the demo)")
	s.Secret(&c.StripeSecretKey, "stripe-secret-key", "TEKRAR_STRIPE_SECRET_KEY", "the Stripe account's secret API key (sk_test_... or sk_live_...); required with --provider stripe; never logged", "sk_test_", "sk_live_", "rk_test_", "rk_live_")
	s.Secret(&c.StripeWebhookSecret, "stripe-webhook-secret", "TEKRAR_STRIPE_WEBHOOK_SECRET", "the Stripe webhook endpoint's signing secret (whsec_...); unset: POST /webhooks/stripe is not served", "whsec_")
	s.Require(func() error {
		if c.Provider == ProviderStripe && c.StripeSecretKey == "" {
			return errors.New("TEKRAR_STRIPE_SECRET_KEY (--stripe-secret-key) is required with --provider stripe")
		}
		if c.Provider == ProviderStripe && c.PSPURL != "" {
			return errors.New("--psp-url names a sandbox provider: it cannot be set with --provider stripe")
		}
		return nil
	})
}

// ParseWindowEnd reads an end of a reconciliation window: "now", a duration before now
// ("24h", "2d") or an RFC 3339 time.
func ParseWindowEnd(v string, now time.Time) (time.Time, error) {
	if v == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither now, a duration before now (24h, 2d) nor an RFC 3339 time", v)
	}
	return now.Add(-d), nil
}

func bindReconcileWindow(s *Set, c *Server) {
	s.Duration(&c.ReconcileWindow, "reconcile-window", "TEKRAR_RECONCILE_WINDOW", "48h", "how far back each scheduled reconciliation looks at the provider's charges", time.Minute, 90*24*time.Hour)
}

// maxClockShift is a century either way.
const maxClockShift = 100 * 365 * 24 * time.Hour

func bindCrash(s *Set, c *Server) {
	s.List(&c.CrashAt, "crash-at", "TEKRAR_CRASH_AT", "testing only: exit the process at these crash points (after_claim, after_provider, after_complete, inbox_before_commit, reconcile_after_orphan, compensation_after_refund, installment_after_claim, installment_after_provider)",
		"after_claim", "after_provider", "after_complete", "inbox_before_commit", "reconcile_after_orphan", "compensation_after_refund",
		"installment_after_claim", "installment_after_provider")
	s.Float(&c.CrashRate, "crash-rate", "TEKRAR_CRASH_RATE", "1", "testing only: the chance of exiting at an armed crash point", 0, 1)
	s.Duration(&c.ClockShift, "clock-shift", "TEKRAR_CLOCK_SHIFT", "0s", "testing only: run the process's clock this far from the wall clock (e.g. -24000h), to play out days other than today", -maxClockShift, maxClockShift)
}

// BindSweep registers what a one-shot `tekrar sweep` uses: the database, the log and the
// sweep's own settings, with the same names and defaults as serve's.
func BindSweep(s *Set, c *Server) {
	s.DatabaseURL(&c.DatabaseURL, "Postgres connection string (required)")
	bindLog(s, c, "json")
	bindSweep(s, c)
}

func bindLog(s *Set, c *Server, format string) {
	s.Choice(&c.LogFormat, "log-format", "TEKRAR_LOG_FORMAT", format, "log line format", "json", "text")
	s.Level(&c.LogLevel, "log-level", "TEKRAR_LOG_LEVEL", "info", "lowest level logged")
}

func bindSweep(s *Set, c *Server) {
	s.Int(&c.SweepBatch, "sweep-batch", "TEKRAR_SWEEP_BATCH", "1000", "rows per sweep statement", 10, 100000)
	s.Duration(&c.SweepPause, "sweep-pause", "TEKRAR_SWEEP_PAUSE", "10ms", "pause between sweep batches, leaving room for checkout traffic", 0, time.Minute)
	s.Duration(&c.SweepSettle, "sweep-settle", "TEKRAR_SWEEP_SETTLE", "1m", "how long an expired key lives on next to its new tombstone before the row is deleted (longer than any claim statement)", time.Second, 24*time.Hour)
	s.Duration(&c.EventRetention, "event-retention", "TEKRAR_EVENT_RETENTION", "720h", "how long the history of keys (key events) is kept", time.Hour, 3650*24*time.Hour)
}

// BindDevDir registers where dev's private Postgres keeps its data: dev and dev reset.
func BindDevDir(s *Set, p *string) {
	s.String(p, "dev-dir", "TEKRAR_DEV_DIR", DefaultDevDir(), "data directory of the private Postgres (kept between runs)")
}
