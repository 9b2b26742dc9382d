package keyed

import (
	"context"
	"fmt"
	"time"

	"github.com/tekrar/tekrar/internal/problem"
)

// The answers of the decision table that are refusals, and what a refusal of a reused key
// keeps in the key's history.

// keyReusedNext is what a client does after idempotency_key_reused, in step with its
// safe_new_key false: tekrar cannot tell a new purchase from a retry whose body changed.
const keyReusedNext = "If this retries the first request, resend its body; only a request you know to be a new purchase may go under another key"

// ProblemReused refuses a request that is not its key's first request (422
// idempotency_key_reused): another body, or another route.
func ProblemReused(k *Key, method, path string) *problem.Problem {
	detail := "this Idempotency-Key was first used with a different request body; nothing was executed. " + keyReusedNext
	if k.Method != method || k.Path != path {
		detail = fmt.Sprintf("this Idempotency-Key was first used on %s %s; nothing was executed. %s", k.Method, k.Path, keyReusedNext)
	}
	return problem.Of(problem.CodeIdempotencyKeyReused).WithDetail(detail).Advised()
}

// keyExpired refuses a late retry. It is never executed: a POS that was offline for two days
// must not turn its retry into a second charge. A new key is safe only when the request is
// evidently another purchase (its fingerprint differs from the expired one's); a late retry
// of the same request must be resolved by looking the original order up, not re-sent.
//
// It names the order (and refund) by their public ids: the caller reads them (PublicIDs).
func keyExpired(k *Key, sameRequest bool) *problem.Problem {
	detail := "this key's first request is older than the key's retention, so it is no longer replayed; " +
		"its outcome is the order named here. Do not resend this purchase with a new key"
	if !sameRequest {
		detail = "this key was used, and has expired, for another request; send this new purchase with a new key"
	}
	p := problem.Of(problem.CodeIdempotencyKeyExpired).
		WithDetail(detail).
		With("first_seen", k.CreatedAt.UTC().Format(time.RFC3339)).
		With("expired_at", k.ExpiresAt.UTC().Format(time.RFC3339)).
		With("retryable", false).With("safe_new_key", !sameRequest)
	if k.OrderPublicID != "" {
		p.With("order_id", k.OrderPublicID)
	}
	if k.RefundPublicID != "" {
		p.With("refund_id", k.RefundPublicID)
	}
	return p
}

// ProblemInUse answers a request whose key another worker holds (409
// idempotency_key_in_use).
func ProblemInUse() *problem.Problem {
	return problem.Of(problem.CodeIdempotencyKeyInUse).
		WithDetail("retry with the same key after Retry-After seconds, or send 'Prefer: wait=N' to wait for its result").Advised()
}

// ProblemNeedsAttention answers a request whose key an operator must resolve (503
// needs_attention).
func ProblemNeedsAttention() *problem.Problem {
	return problem.Of(problem.CodeNeedsAttention).
		WithDetail("the payment outcome could not be resolved automatically; an operator has been flagged. Do not retry with a new key").Advised()
}

// notKept is what a conflict differed in when nothing tekrar kept of the first request
// differs: the card token is never stored, and two ways of writing one value (1.0 and 1)
// give two fingerprints.
const notKept = "something tekrar does not keep (the card token, or how a value was written)"

// conflictDifferences says, for an operator reading the key's history, in what a request
// that reused a key differs from the key's first request, as far as tekrar kept that
// request: its route, and the order's or refund's fields. It runs on the refusal path
// only; an error leaves the list empty, since the refusal stands either way.
func (e *Engine) conflictDifferences(ctx context.Context, k *Key, req Request, op Operation) []string {
	if k.Method != req.Method || k.Path != req.Path {
		return []string{fmt.Sprintf("route: %s %s → %s %s", k.Method, k.Path, req.Method, req.Path)}
	}
	d, err := op.Differences(ctx, k)
	if err != nil {
		e.logger.Warn("describe a key conflict", "err", err, "key_id", k.ID)
		return nil
	}
	if len(d) == 0 {
		return []string{notKept}
	}
	return d
}
