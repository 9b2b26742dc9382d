package checkout

import (
	"bytes"
	"context"
	"errors"

	"github.com/tekrar/tekrar/internal/db"
)

// Replay answers a request that repeats a completed one from the stored response, before
// the caller decodes and validates the body: only validated requests are ever stored, so
// a body with a stored fingerprint was validated when it first came. A repeat costs one
// fingerprint and one indexed SELECT.
//
// It returns ok false for everything else (a new key, another body, a key in progress,
// expired or in trouble, or a store it could not read), leaving the request to the
// operation's own method after validation, which gives every other answer; what Replay
// learnt travels in req, so that nothing is computed or looked up twice.
func (s *Service) Replay(ctx context.Context, req *Request) (_ Result, ok bool) {
	fp, err := Fingerprint(req.Method, req.Path, req.Body)
	if err != nil {
		return Result{}, false // not JSON: the caller's decoding says why
	}
	req.seen.fp, req.seen.ok = fp, true
	// The lookup does not follow the request's cancellation: it is one indexed SELECT,
	// soon over if the client hangs up, while a cancellable context costs every query two
	// watcher goroutines (database/sql's and lib/pq's); measured, replays took 4-5% less
	// CPU without them. If the database stalls, the pool's stall timeout (db.StallTimeout)
	// ends the lookup, as it ends the claim and the completion (they outlive the request on
	// purpose), and the request fails at once instead of waiting as long again.
	k, err := lookupReplay(context.WithoutCancel(ctx), s.q, req.Client.ID, req.Key)
	if err != nil {
		// errNoKey: a first arrival, which claims without looking again. Any other error
		// is met again, and answered, on the ordinary path.
		req.seen.absent = errors.Is(err, errNoKey)
		if db.IsStalled(err) {
			req.seen.stalled = err
		}
		return Result{}, false
	}
	if k.State != StateCompleted || !bytes.Equal(k.Fingerprint, fp[:]) || !s.cfg.Now().Before(k.ExpiresAt) {
		return Result{}, false
	}
	r, err := k.response()
	if err != nil {
		return Result{}, false
	}
	s.record(*req, k, EventReplayed, r.Status, nil, nil)
	return Result{Response: r, Replayed: true, ExpiresAt: k.ExpiresAt}, true
}
