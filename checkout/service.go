// Package checkout is the domain of tekrar: orders, payments and refunds that happen once
// per idempotency key, however often and however concurrently the request arrives. It knows
// nothing of HTTP frameworks: the API hands it a decoded request and encodes what it
// returns. It owns the tables orders, payments, refunds and idempotency_keys.
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
// keyColumns, order by orderSelect, refund by refundSelect); what the API or the console
// shows is a view built from it. A nullable column is a sql.Null* field, read and written
// (nullString stores "" as NULL); SQL never coalesces a nullable column away. The one
// exception is the public ids read with a key, which are not columns of its row:
// Key.OrderPublicID and RefundPublicID are "" when there is none or they were not read.
// Statements with more than a few parameters name them (:name, filled from a parameter
// struct's db tags; see statement), and every transaction runs through inTx.
package checkout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
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
}

// Crash points: the places between recovery points where a process may die.
const (
	CrashAfterClaim    = "after_claim"    // the key and its order are committed; the provider was not called
	CrashAfterProvider = "after_provider" // the provider answered; nothing of it is stored yet
	CrashAfterComplete = "after_complete" // the outcome is committed; the client has no answer yet
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
}

// NewService returns a service; Close stops its background work.
func NewService(d *sqlx.DB, provider psp.Provider, cfg Config, logger *slog.Logger) *Service {
	cfg = cfg.withDefaults()
	cfg.Routes.validate()
	return &Service{
		db:       d,
		q:        db.NewPrepared(d),
		provider: provider,
		cfg:      cfg,
		logger:   logger,
		history:  keyed.NewHistory(d, logger),
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

// Result is the answer to a keyed request.
type Result struct {
	Response
	Replayed   bool
	ExpiresAt  time.Time
	WaitedFor  time.Duration // Prefer: wait was applied with this cap; 0 when it was not
	KeyCreated bool          // this request created the key (a first arrival)
}

// operation is one kind of keyed request: creating an order, or a refund.
type operation interface {
	// claim creates the key row for this request and the operation's record in the same
	// transaction. It returns errNoKey when a concurrent first arrival holds the key, and
	// a live tombstone of the key, unclaimed, when it was swept in its grace period.
	claim(ctx context.Context, k *Key) (_ *Key, claimed bool, _ error)
	// differences lists the fields of the operation's record (the order, the refund) that
	// this request does not match, for the history of a key it reused.
	differences(ctx context.Context, k *Key) ([]string, error)
	// run drives a claimed key from its recovery point to a response. resumed is false on
	// the first arrival, when nothing can have reached the provider yet.
	run(ctx context.Context, k *Key, resumed bool) (Response, error)
	// spec is what the route's fingerprint covers (FingerprintSpecs).
	spec() FingerprintSpec
}

// execute is the idempotency algorithm shared by every keyed request. Each pass through
// the loop either answers or learns something new about the key (it was claimed by a
// concurrent request, or finished while we waited). Every answer leaves one event in the
// key's history. lk is what Replay learnt of the request, or the zero Lookup.
func (s *Service) execute(ctx context.Context, req Request, lk Lookup, op operation) (Result, error) {
	fp := lk.fp
	if !lk.fpSet {
		var err error
		if fp, err = req.fingerprint(); err != nil {
			return Result{}, fmt.Errorf("fingerprint: %w", err)
		}
	}
	if lk.stalled != nil {
		return Result{}, fmt.Errorf("look up key: %w", lk.stalled)
	}
	// Waiting is measured on the wall clock even when tests inject a business clock.
	wait := min(req.Wait, s.cfg.MaxWait)
	deadline := time.Now().Add(wait)
	poll := 20 * time.Millisecond
	var waited time.Duration
	// Look first: a repeat is one indexed SELECT. Replay may have just looked and found
	// nothing; then claim at once.
	lookup := !lk.absent
	in := &intent{spec: op.spec()}
	for {
		now := s.cfg.Now()
		k, claimed, err := (*Key)(nil), false, errNoKey
		if lookup {
			k, err = lookupKey(ctx, s.q, req.Client.ID, req.Key)
		}
		lookup = true
		if errors.Is(err, errNoKey) {
			nk := &Key{
				ClientID:       req.Client.ID,
				Key:            req.Key,
				Fingerprint:    fp[:],
				Method:         req.Method,
				Path:           req.Path,
				CreatedAt:      now,
				ExpiresAt:      now.Add(req.Client.KeyTTL),
				LeaseExpiresAt: nullTime(now.Add(s.cfg.Lease)),
			}
			if err := s.claimScope(ctx, req, in, nk); err != nil {
				return Result{}, err
			}
			k, claimed, err = op.claim(ctx, nk)
		}
		switch {
		case errors.Is(err, errNoKey):
			continue // a concurrent first arrival committed meanwhile: look again
		case err != nil:
			return Result{}, err
		case claimed:
			res, err := s.finish(ctx, k, op, false)
			s.recordRun(req, k, KindCreated, res, err)
			return res, err
		}
		d, res, err := s.decide(ctx, req, fp, k, in, op, now)
		switch d {
		case decided:
			if err == nil {
				res.WaitedFor = waited
			}
			return res, err
		case leased:
			left := time.Until(deadline)
			if left <= 0 || sleep(ctx, min(poll, left)) != nil {
				return Result{}, s.refuseInUse(req, k)
			}
			waited = wait
			poll = min(2*poll, 250*time.Millisecond)
			continue
		}
		taken, err := takeOver(ctx, s.q, k, now, s.cfg.Lease)
		if errors.Is(err, errNoKey) {
			continue // someone else resumed it; look again
		}
		if err != nil {
			return Result{}, err
		}
		res, err = s.finish(ctx, taken, op, true)
		res.WaitedFor = waited
		s.recordRun(req, taken, KindResumed, res, err)
		return res, err
	}
}

// decision is what the decision table says of a request whose key exists.
type decision int

const (
	decided decision = iota // answered: a replay, or a refusal (expired, reused, needs attention)
	leased                  // another worker holds the key: wait for it (Prefer: wait), or refuseInUse
	lapsed                  // nobody holds the unfinished key: take it over and resume it
)

// decide is the one decision table of a keyed request whose key exists (or was swept and
// left its tombstone), for every door: execute's (POST /v1/orders, refunds) and a
// register's batch (SellBatch). In order: an expired key is a late retry; a request that
// is not the key's (after the scope match: a new token of the key's card is the same
// purchase) is a reused key, its differences kept in the key's history; a completed key
// replays; one that needs attention is refused. Each of these answers leaves one event in
// the key's history. What remains is a key in progress, leased or lapsed, which the door
// waits for or takes over; decide records nothing for it.
func (s *Service) decide(ctx context.Context, req Request, fp [32]byte, k *Key, in *intent, op operation, now time.Time) (decision, Result, error) {
	// The same request: the exact fingerprint, or (on the same route) what the route's
	// spec covers, a new token of the same card included (sameScope).
	sameRequest := bytes.Equal(k.Fingerprint, fp[:])
	var matched map[string]any
	var differs string
	if !sameRequest && k.Method == req.Method && k.Path == req.Path {
		var err error
		if sameRequest, differs, err = s.sameScope(ctx, req, k, in); err != nil {
			return decided, Result{}, err
		}
		if sameRequest {
			matched = map[string]any{"matched": "scope"}
		}
	}
	if k.Expired(now) {
		if err := publicIDs(ctx, s.q, k); err != nil {
			return decided, Result{}, err
		}
		p := keyExpired(k, sameRequest)
		s.record(req, k, KindLateRetry, p.Status, fp[:], map[string]any{"expired_at": k.ExpiresAt.UTC(), "swept": k.Tombstone, "same_request": sameRequest})
		return decided, Result{}, p
	}
	if !sameRequest {
		p := keyReused(k, req.Method, req.Path)
		d := []string{differs}
		if differs == "" {
			d = s.conflictDifferences(ctx, k, req, op)
		}
		s.record(req, k, KindReusedConflict, p.Status, fp[:], map[string]any{"method": req.Method, "path": req.Path,
			"differs": d})
		return decided, Result{}, p
	}
	switch k.State {
	case StateCompleted:
		r, err := k.response()
		if err != nil {
			return decided, Result{}, err
		}
		s.record(req, k, KindReplayed, r.Status, nil, matched)
		return decided, Result{Response: r, Replayed: true, ExpiresAt: k.ExpiresAt}, nil
	case StateNeedsAttention:
		p := keyNeedsAttention(k)
		s.record(req, k, KindInUseRejected, p.Status, nil, map[string]any{"state": k.State})
		return decided, Result{}, p
	}
	if k.leased(now) {
		return leased, Result{}, nil
	}
	return lapsed, Result{}, nil
}

// refuseInUse answers a request whose key another worker holds, once the request will not
// wait (longer) for it, and records the refusal in the key's history.
func (s *Service) refuseInUse(req Request, k *Key) error {
	p := keyInUse()
	s.record(req, k, KindInUseRejected, p.Status, nil, nil)
	return p
}

// recordRun records a request that worked on its key: created or resumed, with the status
// it answered, and completed when its response was stored.
func (s *Service) recordRun(req Request, k *Key, kind string, res Result, err error) {
	status := res.Status
	var p *problem.Problem
	switch {
	case errors.As(err, &p):
		status = p.Status
	case err != nil:
		status = http.StatusServiceUnavailable
	}
	// Public ids: operators see the event's detail. Every key that reaches here was read
	// with them (a claim, a takeover) or by its refund's run.
	detail := map[string]any{}
	if k.OrderPublicID != "" {
		detail["order_id"] = k.OrderPublicID
	}
	if k.RefundPublicID != "" {
		detail["refund_id"] = k.RefundPublicID
	}
	s.record(req, k, kind, status, nil, detail)
	if err == nil {
		s.record(req, k, KindCompleted, status, nil, detail)
	}
}

func (s *Service) record(req Request, k *Key, kind string, status int, fp []byte, detail map[string]any) {
	s.history.Record(keyed.Entry{
		At: s.cfg.Now(), ClientID: req.Client.ID, Key: req.Key, KeyID: k.ID, Kind: kind,
		Status: status, Meta: req.Meta, Fingerprint: fp, Detail: detail,
	})
}

// finish runs a claimed key to its response. Once a key is claimed the work must not be
// abandoned because the client hung up, so it runs on a context that the request's
// cancellation does not reach.
func (s *Service) finish(ctx context.Context, k *Key, op operation, resumed bool) (Result, error) {
	ctx = context.WithoutCancel(ctx)
	if !resumed {
		s.crash(CrashAfterClaim)
	}
	stop := s.renewLease(ctx, k)
	r, err := op.run(ctx, k, resumed)
	stop()
	if err == nil {
		s.crash(CrashAfterComplete)
	}
	if errors.Is(err, errFenced) {
		// Another worker took the key over while this one was slow; it will answer.
		return Result{ExpiresAt: k.ExpiresAt}, keyInUse()
	}
	if err != nil {
		return Result{ExpiresAt: k.ExpiresAt}, err
	}
	return Result{Response: r, ExpiresAt: k.ExpiresAt, KeyCreated: !resumed}, nil
}

// renewLease extends the key's lease every third of its length while the work runs, so
// that a slow but live worker is not taken over. It stops when the returned func is called.
// A renewal that matches no row means the key was taken over: the work goes on, and its
// completion will be fenced.
func (s *Service) renewLease(ctx context.Context, k *Key) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(s.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := extendLease(ctx, s.q, k, s.cfg.Now().Add(s.cfg.Lease)); err != nil {
					s.logger.Warn("lease renewal failed", "key_id", k.ID, "err", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
