package keyed

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
)

// Config tunes an Engine. Lease, MaxWait, Now and Card are required: the door that runs
// the engine (checkout's Service) has its defaults.
type Config struct {
	// Lease is how long a worker holds a key before another may take it over.
	Lease time.Duration
	// MaxWait caps Request.Wait.
	MaxWait time.Duration
	// Now is the clock.
	Now func() time.Time
	// Crash, if set, is called at CrashAfterClaim and CrashAfterComplete.
	Crash func(point string)
	// Card says which card a single-use token is at the provider: NULL for a token the
	// provider does not know (its request then matches by its exact fingerprint only), an
	// error when the provider cannot say.
	Card func(ctx context.Context, token string) (sql.NullString, error)
	// Cache, if set, answers replays of completed keys from memory (Cache); nil reads every
	// replay from the database.
	Cache *Cache
}

// Crash points of a keyed request (Config.Crash).
const (
	CrashAfterClaim    = "after_claim"    // the key and its record are committed; the operation did not run
	CrashAfterComplete = "after_complete" // the outcome is committed; the client has no answer yet
)

// Engine runs keyed requests: Replay, Execute and ExecuteMany.
type Engine struct {
	db      sqlx.ExtContext
	cfg     Config
	logger  *slog.Logger
	history *History
}

// New returns an engine on db (the prepared statements of the hot paths), recording in
// history. It panics naming a missing Config field.
func New(db sqlx.ExtContext, history *History, cfg Config, logger *slog.Logger) *Engine {
	switch {
	case cfg.Lease <= 0:
		panic("keyed: Config.Lease must be positive")
	case cfg.MaxWait < 0:
		panic("keyed: Config.MaxWait is negative")
	case cfg.Now == nil:
		panic("keyed: Config.Now is nil")
	case cfg.Card == nil:
		panic("keyed: Config.Card is nil")
	}
	return &Engine{db: db, cfg: cfg, logger: logger, history: history}
}

// Request is what the engine needs of a keyed request.
type Request struct {
	ClientID int64
	KeyTTL   time.Duration // the client's key retention
	Key      string
	Method   string
	Path     string
	// Body is the raw JSON body, for the fingerprint.
	Body []byte
	// Bound is what the body names by reference, as it was when the request arrived,
	// fingerprinted with the body; nil for most requests.
	Bound []byte
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

// Operation is one kind of keyed request (creating an order, a refund, a register's sale).
type Operation interface {
	// Claim creates the key row for this request and the operation's record in the same
	// transaction. It returns ErrNoKey when a concurrent first arrival holds the key, and
	// a live tombstone of the key, unclaimed, when it was swept in its grace period.
	Claim(ctx context.Context, k *Key) (_ *Key, claimed bool, _ error)
	// Differences lists the fields of the operation's record (the order, the refund) that
	// this request does not match, for the history of a key it reused.
	Differences(ctx context.Context, k *Key) ([]string, error)
	// Run drives a claimed key from its recovery point to a response. resumed is false on
	// the first arrival, when nothing can have reached the provider yet.
	Run(ctx context.Context, k *Key, resumed bool) (Response, error)
	// Spec is what the operation's fingerprint covers.
	Spec() Spec
}

func (e *Engine) crash(point string) {
	if e.cfg.Crash != nil {
		e.cfg.Crash(point)
	}
}

// Execute is the idempotency algorithm shared by every keyed request. Each pass through
// the loop either answers or learns something new about the key (it was claimed by a
// concurrent request, or finished while we waited). Every answer leaves one event in the
// key's history. lk is what Replay learnt of the request, or the zero Lookup.
func (e *Engine) Execute(ctx context.Context, req Request, lk Lookup, op Operation) (Result, error) {
	fp := lk.fp
	if !lk.fpSet {
		var err error
		if fp, err = fingerprintBound(req.Method, req.Path, req.Body, req.Bound); err != nil {
			return Result{}, fmt.Errorf("fingerprint: %w", err)
		}
	}
	if lk.stalled != nil {
		return Result{}, fmt.Errorf("look up key: %w", lk.stalled)
	}
	// Waiting is measured on the wall clock even when tests inject a business clock.
	wait := min(req.Wait, e.cfg.MaxWait)
	deadline := time.Now().Add(wait)
	poll := 20 * time.Millisecond
	var waited time.Duration
	// Look first: a repeat is one indexed SELECT. Replay may have just looked and found
	// nothing; then claim at once.
	lookup := !lk.absent
	in := &intent{spec: op.Spec()}
	for {
		now := e.cfg.Now()
		k, claimed, err := (*Key)(nil), false, ErrNoKey
		if lookup {
			k, err = Get(ctx, e.db, req.ClientID, req.Key)
		}
		lookup = true
		if errors.Is(err, ErrNoKey) {
			nk := &Key{
				ClientID:       req.ClientID,
				Key:            req.Key,
				Fingerprint:    fp[:],
				Method:         req.Method,
				Path:           req.Path,
				CreatedAt:      now,
				ExpiresAt:      now.Add(req.KeyTTL),
				LeaseExpiresAt: sql.NullTime{Time: now.Add(e.cfg.Lease), Valid: true},
			}
			if err := e.claimScope(req, in, nk); err != nil {
				return Result{}, err
			}
			// The claim commits on its own: detached, so that the request's end cannot
			// cancel its COMMIT, and a lost connection is tdb.ErrCommitUnknown.
			k, claimed, err = op.Claim(tdb.Detach(ctx), nk)
		}
		switch {
		case errors.Is(err, ErrNoKey):
			continue // a concurrent first arrival committed meanwhile: look again
		case err != nil:
			return Result{}, err
		case claimed:
			res, err := e.finish(ctx, k, op, false)
			e.recordRun(req, k, KindCreated, res, err)
			return res, err
		}
		d, res, err := e.decide(ctx, req, fp, k, in, op, now)
		switch d {
		case decided:
			if err == nil {
				res.WaitedFor = waited
			}
			return res, err
		case leased:
			left := time.Until(deadline)
			if left <= 0 || sleep(ctx, min(poll, left)) != nil {
				return Result{}, e.refuseInUse(req, k)
			}
			waited = wait
			poll = min(2*poll, 250*time.Millisecond)
			continue
		}
		taken, err := TakeOver(tdb.Detach(ctx), e.db, k, now, e.cfg.Lease)
		if errors.Is(err, ErrNoKey) {
			continue // someone else resumed it; look again
		}
		if err != nil {
			return Result{}, err
		}
		if in.pending {
			taken.CardFingerprint = in.card
		}
		res, err = e.finish(ctx, taken, op, true)
		res.WaitedFor = waited
		e.recordRun(req, taken, KindResumed, res, err)
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
// left its tombstone), for every door: Execute's (orders, refunds) and a batch's
// (ExecuteMany). In order: an expired key is a late retry; a request that
// is not the key's (after the scope match: a new token of the key's card is the same
// purchase) is a reused key, its differences kept in the key's history; a completed key
// replays; one that needs attention is refused. Each of these answers leaves one event in
// the key's history. What remains is a key in progress, leased or lapsed, which the door
// waits for or takes over; decide records nothing for it.
func (e *Engine) decide(ctx context.Context, req Request, fp [32]byte, k *Key, in *intent, op Operation, now time.Time) (decision, Result, error) {
	// The same request: the exact fingerprint, or (on the same route) what the route's
	// spec covers, a new token of the same card included (sameScope).
	sameRequest := bytes.Equal(k.Fingerprint, fp[:])
	var matched map[string]any
	var differs string
	if !sameRequest && k.Method == req.Method && k.Path == req.Path {
		var err error
		if sameRequest, differs, err = e.sameScope(ctx, req, k, in); err != nil {
			return decided, Result{}, err
		}
		if sameRequest {
			matched = map[string]any{"matched": "scope"}
		}
	}
	if k.Expired(now) {
		if err := PublicIDs(ctx, e.db, k); err != nil {
			return decided, Result{}, err
		}
		p := keyExpired(k, sameRequest)
		e.record(req, k, KindLateRetry, p.Status, fp[:], map[string]any{"expired_at": k.ExpiresAt.UTC(), "swept": k.Tombstone, "same_request": sameRequest})
		return decided, Result{}, p
	}
	if !sameRequest {
		p := ProblemReused(k, req.Method, req.Path)
		d := []string{differs}
		if differs == "" {
			d = e.conflictDifferences(ctx, k, req, op)
		}
		e.record(req, k, KindReusedConflict, p.Status, fp[:], map[string]any{"method": req.Method, "path": req.Path,
			"differs": d})
		return decided, Result{}, p
	}
	switch k.State {
	case StateCompleted:
		r, err := k.StoredResponse()
		if err != nil {
			return decided, Result{}, err
		}
		e.record(req, k, KindReplayed, r.Status, nil, matched)
		return decided, Result{Response: r, Replayed: true, ExpiresAt: k.ExpiresAt}, nil
	case StateNeedsAttention:
		p := ProblemNeedsAttention()
		e.record(req, k, KindInUseRejected, p.Status, nil, map[string]any{"state": k.State})
		return decided, Result{}, p
	}
	if k.Leased(now) {
		return leased, Result{}, nil
	}
	return lapsed, Result{}, nil
}

// refuseInUse answers a request whose key another worker holds, once the request will not
// wait (longer) for it, and records the refusal in the key's history.
func (e *Engine) refuseInUse(req Request, k *Key) error {
	p := ProblemInUse()
	e.record(req, k, KindInUseRejected, p.Status, nil, nil)
	return p
}

// recordRun records a request that worked on its key: created or resumed, with the status
// it answered, and completed when its response was stored.
func (e *Engine) recordRun(req Request, k *Key, kind string, res Result, err error) {
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
	e.record(req, k, kind, status, nil, detail)
	if err == nil {
		e.record(req, k, KindCompleted, status, nil, detail)
	}
}

func (e *Engine) record(req Request, k *Key, kind string, status int, fp []byte, detail map[string]any) {
	e.history.Record(Entry{
		At: e.cfg.Now(), ClientID: req.ClientID, Key: req.Key, KeyID: k.ID, Kind: kind,
		Status: status, Meta: req.Meta, Fingerprint: fp, Detail: detail,
	})
}

// finish runs a claimed key to its response. Once a key is claimed the work must not be
// abandoned because the client hung up, so it runs on a context that the request's
// cancellation does not reach (tdb.Detach): its completion's COMMIT runs to its answer. A
// completion whose COMMIT's outcome is unknown (tdb.ErrCommitUnknown) is returned as it is:
// nothing here releases the key, which stays for its lease to run out and the client's
// retry or the completer to finish it, looking first at what the provider and the key say.
func (e *Engine) finish(ctx context.Context, k *Key, op Operation, resumed bool) (Result, error) {
	ctx = tdb.Detach(ctx)
	if !resumed {
		e.crash(CrashAfterClaim)
	}
	stop := e.renewLease(ctx, k)
	r, err := op.Run(ctx, k, resumed)
	stop()
	if err == nil {
		e.crash(CrashAfterComplete)
	}
	if errors.Is(err, ErrFenced) {
		// Another worker took the key over while this one was slow; it will answer.
		return Result{ExpiresAt: k.ExpiresAt}, ProblemInUse()
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
func (e *Engine) renewLease(ctx context.Context, k *Key) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(e.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := SetStateIfInProgress(ctx, e.db, Extend(k, e.cfg.Now().Add(e.cfg.Lease))); err != nil {
					e.logger.Warn("lease renewal failed", "key_id", k.ID, "err", err)
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
