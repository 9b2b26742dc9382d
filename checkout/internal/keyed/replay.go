package keyed

import (
	"bytes"
	"context"
	"errors"

	"github.com/tekrar/tekrar/internal/db"
)

// Lookup is what Replay learnt of a request that it could not answer, for the Execute
// that answers it instead (checkout's CreateOrder, CreateRefund): the request's fingerprint, and what
// became of the key's lookup. It travels as a value from one step to the next, so that a
// request that is not a replay is neither fingerprinted nor looked up twice, and a first
// arrival goes straight to its claim. The zero Lookup is a request nobody looked at (an
// operator's refund, a test): the operation then does both itself.
type Lookup struct {
	fp    [32]byte
	fpSet bool // fp is the request's fingerprint
	// absent: the key did not exist when Replay looked.
	absent bool
	// stalled is Replay's lookup failing because the database did not answer in time:
	// looking again would wait as long again, so the request fails at once.
	stalled error
}

// Replay answers a request that repeats a completed one from the stored response, before
// the caller decodes and validates the body: only validated requests are ever stored, so
// a body with a stored fingerprint was validated when it first came. A repeat costs one
// fingerprint and one indexed SELECT.
//
// It returns ok false for everything else (a new key, another body, a key in progress,
// expired or in trouble, or a store it could not read), leaving the request to the
// operation's own method after validation, which gives every other answer; the Lookup it
// returns then goes to that method, so that nothing is computed or looked up twice.
//
// With a Cache, a repeat of a completed key that the cache holds costs the fingerprint
// alone: the same answer, the same history entry, no database read. The cache never
// answers another body (the database's path answers it, a conflict or a scope match), nor
// a key at or past its expiry; a key read from the database to answer a replay fills it.
// A cached answer's Response is shared by every replay it serves: callers only read it.
func (e *Engine) Replay(ctx context.Context, req Request) (_ Result, _ Lookup, ok bool) {
	var lk Lookup
	fp, err := fingerprintBound(req.Method, req.Path, req.Body, req.Bound)
	if err != nil {
		return Result{}, lk, false // not JSON: the caller's decoding says why
	}
	lk.fp, lk.fpSet = fp, true
	var seq uint64
	if c := e.cfg.Cache; c != nil {
		if hit, found := c.get(req.ClientID, req.Key); found {
			switch {
			case Expired(hit.expiresAt, e.cfg.Now()):
				c.dropExpired(hit)
			case hit.fp == fp:
				c.hits.Add(1)
				e.record(req, &Key{ID: hit.keyID}, KindReplayed, hit.resp.Status, nil, nil)
				return Result{Response: hit.resp, Replayed: true, ExpiresAt: hit.expiresAt}, lk, true
			}
		}
		seq = c.stamp()
	}
	// The lookup does not follow the request's cancellation: it is one indexed SELECT,
	// soon over if the client hangs up, while a cancellable context costs every query two
	// watcher goroutines (database/sql's and lib/pq's); measured, replays took 4-5% less
	// CPU without them. If the database stalls, the pool's stall timeout (db.StallTimeout)
	// ends the lookup, as it ends the claim and the completion (they outlive the request on
	// purpose), and the request fails at once instead of waiting as long again.
	k, err := getReplay(context.WithoutCancel(ctx), e.db, req.ClientID, req.Key)
	if err != nil {
		// ErrNoKey: a first arrival, which claims without looking again. Any other error
		// is met again, and answered, on the ordinary path.
		lk.absent = errors.Is(err, ErrNoKey)
		if db.IsStalled(err) {
			lk.stalled = err
		}
		return Result{}, lk, false
	}
	if k.State != StateCompleted || !bytes.Equal(k.Fingerprint, fp[:]) || k.Expired(e.cfg.Now()) {
		return Result{}, lk, false
	}
	r, err := k.StoredResponse()
	if err != nil {
		return Result{}, lk, false
	}
	e.record(req, k, KindReplayed, r.Status, nil, nil)
	if c := e.cfg.Cache; c != nil {
		c.put(seq, &cached{k: cacheKey{req.ClientID, req.Key}, keyID: k.ID, fp: fp, resp: r, expiresAt: k.ExpiresAt})
	}
	return Result{Response: r, Replayed: true, ExpiresAt: k.ExpiresAt}, lk, true
}

// Fingerprinted is the Lookup of a request whose fingerprint its door computed (a
// register's sale), and that nobody looked up yet.
func Fingerprinted(fp [32]byte) Lookup { return Lookup{fp: fp, fpSet: true} }
