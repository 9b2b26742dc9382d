// Package checkout is the domain of tekrar: orders, payments and refunds that happen once
// per idempotency key, however often and however concurrently the request arrives. It knows
// nothing of HTTP frameworks: the API hands it a decoded request and encodes what it
// returns. It owns the tables orders, payments and refunds, and claims keys with them; the
// idempotency engine (checkout/internal/keyed) runs every keyed request.
//
// A keyed request runs in recovery points, each its own short transaction, so that the
// provider call never sits inside an open transaction and a crash between steps leaves a
// state that a retry can resume:
//
//  1. claim: insert the key row and create the order (or refund), in one statement;
//  2. call the provider with a key derived from the request's intent (providerKey), never
//     the client's raw key;
//  3. complete: record the payment, the order status and the response, and finish the key,
//     fenced by the lease token so that a worker that lost its lease writes nothing.
//
// Reading and writing rows: each thing is read in one Go shape, by one select list (Key by
// keyed.Columns, order by orderSelect, refund by refundSelect); what the API or the console
// shows is a view built from it. A nullable column is a sql.Null* field, read and written
// (nullString stores "" as NULL); SQL never coalesces a nullable column away. The one
// exception is the public ids read with a key, which are not columns of its row:
// Key.OrderPublicID and RefundPublicID are "" when there is none or they were not read.
// Statements with more than a few parameters name them (:name, filled from a parameter
// struct's db tags; see statement), and every transaction runs through inTx.
package checkout

import (
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/db"
)

// Config tunes the engine; the zero value of a field takes its default.
type Config struct {
	// Lease is how long a worker holds a key before another may take it over.
	Lease time.Duration
	// ProviderTimeout bounds one provider call; past it the outcome is unknown.
	ProviderTimeout time.Duration
	// MaxWait caps Prefer: wait.
	MaxWait time.Duration
	// ProviderHorizon is how long after tekrar gave up on a charge, at a provider that cannot
	// cancel a charge key, a charge under it may still be made: the time a request sent
	// before can still be processed, and the longest stall of a worker tekrar guards
	// against. Until then the refund owed for such a charge is watched for.
	ProviderHorizon time.Duration
	// Now is the clock; tests inject one.
	Now func() time.Time
	// Crash, if set, is called at each crash point (the Crash* constants) so that the crash
	// harness can kill the process exactly there. Nil in production.
	Crash func(point string)
	// ObserveSales, when not nil, is told the outcomes of every batch of a register's sales
	// that SellBatch answered, and the client it came from (metrics).
	ObserveSales func(client int64, out []SaleOutcome)
	// Routes are the API's routes of the keyed operations (api.Routes); required.
	Routes Routes
	// ReplayCache, if set, answers replays from memory (ReplayCache); nil reads each from
	// the database.
	ReplayCache *ReplayCache
}

// Crash points: the places between recovery points where a process may die.
const (
	CrashAfterClaim    = keyed.CrashAfterClaim    // the key and its order are committed; the provider was not called
	CrashAfterProvider = "after_provider"         // the provider answered; nothing of it is stored yet
	CrashAfterComplete = keyed.CrashAfterComplete // the outcome is committed; the client has no answer yet
	// CrashInboxBeforeCommit: a provider event and its effect are written, not committed.
	CrashInboxBeforeCommit = "inbox_before_commit"
	// CrashReconcileAfterOrphan: reconciliation committed the compensation of an orphan
	// charge; the rest of the window is not walked and nothing is refunded yet.
	CrashReconcileAfterOrphan = "reconcile_after_orphan"
	// CrashInstallmentAfterClaim: an installment's attempt is claimed and leased (package
	// installments); the provider was not called.
	CrashInstallmentAfterClaim = "installment_after_claim"
	// CrashInstallmentAfterProvider: the provider answered an installment's attempt; nothing
	// of it is stored.
	CrashInstallmentAfterProvider = "installment_after_provider"
	// CrashCompensationAfterRefund: the provider made a compensation's refund; tekrar has
	// not recorded it.
	CrashCompensationAfterRefund = "compensation_after_refund"
)

func (s *Service) crash(point string) {
	if s.cfg.Crash != nil {
		s.cfg.Crash(point)
	}
}

func (c Config) withDefaults() Config {
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.ProviderTimeout == 0 {
		c.ProviderTimeout = 10 * time.Second
	}
	if c.MaxWait == 0 {
		c.MaxWait = 10 * time.Second
	}
	if c.ProviderHorizon == 0 {
		c.ProviderHorizon = 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Service runs keyed requests.
type Service struct {
	db       *sqlx.DB
	q        *db.Prepared // the hot-path statements, prepared
	provider psp.Provider
	cfg      Config
	logger   *slog.Logger
	history  *keyed.History
	eng      *keyed.Engine // runs every keyed request (engine.go)
}

// NewService returns a service; Close stops its background work.
func NewService(d *sqlx.DB, provider psp.Provider, cfg Config, logger *slog.Logger) *Service {
	cfg = cfg.withDefaults()
	cfg.Routes.validate()
	s := &Service{
		db:       d,
		q:        db.NewPrepared(d),
		provider: provider,
		cfg:      cfg,
		logger:   logger,
		history:  keyed.NewHistory(d, logger),
	}
	s.eng = keyed.New(s.q, s.history, keyed.Config{Lease: cfg.Lease, MaxWait: cfg.MaxWait, Now: cfg.Now,
		Crash: cfg.Crash, Card: s.cardOf, Cache: cfg.ReplayCache}, logger)
	return s
}

// ForgetReplay drops the client's key from this process's replay cache, if it has one: an
// action of this process that changed the key does not wait for its own notification.
func (s *Service) ForgetReplay(clientID int64, key string) {
	if s.cfg.ReplayCache != nil {
		s.cfg.ReplayCache.Drop(clientID, key)
	}
}

// Close flushes what the service still holds in memory (its key history).
func (s *Service) Close() { s.history.Close() }

// FlushHistory writes every history entry recorded so far; entries are otherwise written a few
// times a second.
func (s *Service) FlushHistory() { s.history.Flush() }

// Request is the part of a keyed request that the idempotency layer needs.
type Request struct {
	Client clients.Client
	Key    string
	Method string
	Path   string
	// Body is the raw JSON body, for the fingerprint.
	Body []byte
	// Bound is what the body names by reference, as it was when the request arrived (the
	// items of an order's cart_id; see BindCart), fingerprinted with the body. Nil for most
	// requests, whose fingerprint is the body's alone.
	Bound []byte
	cart  *boundCart
	// Wait is how long the client is prepared to wait for an in-flight first request
	// (Prefer: wait); zero answers 409 at once.
	Wait time.Duration
	// Meta identifies the sender in the key's history.
	Meta Meta
}

// Result is the answer to a keyed request (keyed.Result).
type Result = keyed.Result
