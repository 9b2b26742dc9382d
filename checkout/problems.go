package checkout

import (
	"fmt"
	"time"

	"github.com/tekrar/tekrar/checkout/fields"
	"github.com/tekrar/tekrar/internal/problem"
)

// keyReusedNext is what a client does after idempotency_key_reused, in step with its
// safe_new_key false: tekrar cannot tell a new purchase from a retry whose body changed.
const keyReusedNext = "If this retries the first request, resend its body; only a request you know to be a new purchase may go under another key"

func keyReused(k *Key, method, path string) *problem.Problem {
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
// It names the order (and refund) by their public ids: the caller reads them (publicIDs).
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

func keyInUse() *problem.Problem {
	return problem.Of(problem.CodeIdempotencyKeyInUse).
		WithDetail("retry with the same key after Retry-After seconds, or send 'Prefer: wait=N' to wait for its result").Advised()
}

func keyNeedsAttention(k *Key) *problem.Problem {
	return problem.Of(problem.CodeNeedsAttention).
		WithDetail("the payment outcome could not be resolved automatically; an operator has been flagged. Do not retry with a new key").Advised()
}

// PaymentPending is the answer when the provider's outcome is unknown (it timed out or
// failed): the charge may exist, so only a retry with the same key, which looks it up
// first, is safe.
func paymentPending() *problem.Problem {
	return problem.Of(problem.CodePaymentPending).
		WithDetail("the payment provider did not answer in time; retry with the same Idempotency-Key, never a new one").Advised()
}

// StoreUnavailable fails closed: nothing runs without its key record.
func StoreUnavailable() *problem.Problem {
	return problem.Of(problem.CodeStoreUnavailable).WithDetail("retry with the same Idempotency-Key").Advised()
}

// ValidationFailed lists every invalid field at once.
func ValidationFailed(errs []FieldError) *problem.Problem {
	return problem.Of(problem.CodeValidationFailed).
		WithDetail("fix the listed fields and resend; nothing was stored, the same key may be reused").
		With("errors", errs).Advised()
}

// FieldError is one invalid field of a request: the type checkout/deliveries shares (see
// package fields for why it lives there).
type FieldError = fields.Error
