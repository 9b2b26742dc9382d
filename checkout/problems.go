package checkout

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/tekrar/tekrar/internal/problem"
)

// Advice says what a client may do after a problem on a keyed request: retry with the same
// key, and whether a new key is safe (cannot cause a second charge). Every problem a keyed
// request can get is in this table, so that no answer leaves a client guessing.
type Advice struct{ Retryable, SafeNewKey bool }

var advice = map[string]Advice{
	// Nothing was executed and the request as sent can never succeed: fix it; the same
	// key may be reused for the fixed request, and so may a new one.
	"idempotency_key_missing": {false, true},
	"idempotency_key_invalid": {false, true},
	"validation_failed":       {false, true},
	"malformed_json":          {false, true},
	"body_too_large":          {false, true},
	"unsupported_media_type":  {false, true},
	"unauthorized":            {false, true},
	"malformed_request":       {false, true},
	"order_not_found":         {false, true},
	"order_not_refundable":    {false, true},
	"refund_exceeds_captured": {false, true},
	"not_found":               {false, true},
	"method_not_allowed":      {false, true},
	// A final, stored outcome: a retry replays it; a new key is a new attempt that
	// charges nothing twice (the declined attempt charged nothing).
	"payment_declined": {false, true},
	// The completer canceled an abandoned order before any charge: nothing was charged.
	"payment_abandoned": {false, true},
	// The key already stands for another request, or for a request that has expired:
	// its effect may exist, so a new key could duplicate it.
	"idempotency_key_reused":  {false, false},
	"idempotency_key_expired": {false, false},
	// The outcome is not known yet: retry with the same key, never a new one.
	"idempotency_key_in_use": {true, false},
	"payment_pending":        {true, false},
	"store_unavailable":      {true, false},
	"needs_attention":        {true, false},
	"internal_error":         {true, false},
}

// AdvisedCodes lists the codes the advice table knows, for the test that keeps it, the
// codes raised and docs/problems.md in step.
func AdvisedCodes() []string { return slices.Sorted(maps.Keys(advice)) }

// AdviseKeyed adds retryable and safe_new_key to a problem answered to a keyed request.
func AdviseKeyed(p *problem.Problem) *problem.Problem {
	if _, ok := p.Extensions["retryable"]; ok {
		return p
	}
	a, ok := advice[p.Code]
	if !ok {
		a = Advice{Retryable: p.Status >= 500, SafeNewKey: false}
	}
	return p.With("retryable", a.Retryable).With("safe_new_key", a.SafeNewKey)
}

func keyReused(k *Key, method, path string) *problem.Problem {
	detail := "this Idempotency-Key was first used with a different request body; use a new key for a new intent"
	if k.Method != method || k.Path != path {
		detail = fmt.Sprintf("this Idempotency-Key was first used on %s %s", k.Method, k.Path)
	}
	return AdviseKeyed(problem.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
		"Idempotency key reused with another request").WithDetail(detail))
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
	p := problem.New(http.StatusUnprocessableEntity, "idempotency_key_expired", "Idempotency key expired").
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
	return AdviseKeyed(problem.New(http.StatusConflict, "idempotency_key_in_use",
		"A request with this key is still in progress").
		WithDetail("retry with the same key after Retry-After seconds, or send 'Prefer: wait=N' to wait for its result"))
}

func keyNeedsAttention(k *Key) *problem.Problem {
	return AdviseKeyed(problem.New(http.StatusServiceUnavailable, "needs_attention",
		"This request needs an operator").
		WithDetail("the payment outcome could not be resolved automatically; an operator has been flagged. Do not retry with a new key"))
}

// PaymentPending is the answer when the provider's outcome is unknown (it timed out or
// failed): the charge may exist, so only a retry with the same key, which looks it up
// first, is safe.
func paymentPending() *problem.Problem {
	return AdviseKeyed(problem.New(http.StatusServiceUnavailable, "payment_pending",
		"Payment outcome not known yet").
		WithDetail("the payment provider did not answer in time; retry with the same Idempotency-Key, never a new one"))
}

// StoreUnavailable fails closed: nothing runs without its key record.
func StoreUnavailable() *problem.Problem {
	return AdviseKeyed(problem.New(http.StatusServiceUnavailable, "store_unavailable", "Database unavailable").
		WithDetail("retry with the same Idempotency-Key"))
}

// ValidationFailed lists every invalid field at once.
func ValidationFailed(errs []FieldError) *problem.Problem {
	return AdviseKeyed(problem.New(http.StatusUnprocessableEntity, "validation_failed", "Validation failed").
		WithDetail("fix the listed fields and resend; nothing was stored, the same key may be reused").
		With("errors", errs))
}

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}
