package checkout

import (
	"github.com/tekrar/tekrar/checkout/fields"
	"github.com/tekrar/tekrar/internal/problem"
)

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

// CommitUnknown answers a request whose COMMIT's outcome is unknown (db.ErrCommitUnknown):
// the connection was lost before Postgres answered, so the key, the order or the charge's
// record may stand or not. It is not store_unavailable, which says nothing was executed: a
// new key could pay twice, and the same key is safe (its retry, or the completer, finds
// what stands and finishes it once).
func CommitUnknown() *problem.Problem {
	return problem.Of(problem.CodeCommitUnknown).
		WithDetail("the database did not confirm what was done; retry with the same Idempotency-Key, never a new one").Advised()
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
