package sdk

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Code is a problem's stable code, what a caller branches on (docs/problems.md).
type Code string

// Error is a problem tekrar answered (RFC 9457 problem details), as the last attempt of a
// call received it. errors.Is matches it against the sentinel of its code:
//
//	if errors.Is(err, sdk.ErrPaymentDeclined) { ... }
//
// and errors.As gives the details.
type Error struct {
	Status int
	Code   Code
	Title  string
	Detail string
	// Retryable: the same request with the same key may succeed. The SDK has already
	// retried it as far as its Policy allows.
	Retryable bool
	// SafeNewKey: a new key cannot cause a second charge. Only then may the caller start the
	// intent again under a new key (or when the customer changes the purchase). When false,
	// keep the key: the first attempt may have charged, or may still charge, the card.
	SafeNewKey bool
	// RetryAfter is the answer's Retry-After; 0 when it had none.
	RetryAfter time.Duration
	// OrderID names the order the problem is about (payment_declined, payment_abandoned,
	// idempotency_key_expired), when it names one.
	OrderID string
	// Fields lists what is wrong with the request (validation_failed).
	Fields []FieldError
	// Extensions holds every member of the problem, standard ones included, as sent.
	Extensions map[string]json.RawMessage
	// Key is the Idempotency-Key the call used; empty for a call without one.
	Key string
	// Attempts is how many requests the call sent.
	Attempts int
}

// FieldError is one member of a validation_failed problem's "errors".
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	msg := e.Title
	if e.Detail != "" {
		msg = e.Detail
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tekrar: %d %s: %s", e.Status, e.Code, msg)
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "; %s %s", f.Field, f.Message)
	}
	return b.String()
}

// Is matches any problem of the same code: errors.Is(err, sdk.ErrOutOfStock).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code == e.Code
}

// sentinels are the errors of the codes this package knows, by code.
var sentinels = map[Code]*Error{}

// sentinel is the error a caller compares with errors.Is; only its code matters.
func sentinel(c Code) *Error {
	e := &Error{Code: c}
	sentinels[c] = e
	return e
}

// The codes tekrar answers, each with its sentinel. A code not listed here (from a newer
// tekrar) still arrives as an *Error with its code, and is retried as it says.
const (
	CodeIdempotencyKeyMissing         Code = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid         Code = "idempotency_key_invalid"
	CodeMalformedJSON                 Code = "malformed_json"
	CodeMalformedRequest              Code = "malformed_request"
	CodeUnauthorized                  Code = "unauthorized"
	CodePaymentDeclined               Code = "payment_declined"
	CodeCrossOriginRequest            Code = "cross_origin_request"
	CodeNotFound                      Code = "not_found"
	CodeOrderNotFound                 Code = "order_not_found"
	CodeRefundNotFound                Code = "refund_not_found"
	CodeIdempotencyKeyNotFound        Code = "idempotency_key_not_found"
	CodeMethodNotAllowed              Code = "method_not_allowed"
	CodeOrderNotRefundable            Code = "order_not_refundable"
	CodePaymentAbandoned              Code = "payment_abandoned"
	CodeIdempotencyKeyInUse           Code = "idempotency_key_in_use"
	CodeBodyTooLarge                  Code = "body_too_large"
	CodeUnsupportedMediaType          Code = "unsupported_media_type"
	CodeValidationFailed              Code = "validation_failed"
	CodeRefundExceedsCaptured         Code = "refund_exceeds_captured"
	CodeIdempotencyKeyReused          Code = "idempotency_key_reused"
	CodeIdempotencyKeyExpired         Code = "idempotency_key_expired"
	CodeHeadersTooLarge               Code = "headers_too_large"
	CodeInternalError                 Code = "internal_error"
	CodeTransferEncodingNotSupported  Code = "transfer_encoding_not_supported"
	CodePaymentPending                Code = "payment_pending"
	CodeStoreUnavailable              Code = "store_unavailable"
	CodeCommitUnknown                 Code = "commit_unknown"
	CodeNeedsAttention                Code = "needs_attention"
	CodeHTTPVersionNotSupported       Code = "http_version_not_supported"
	CodeWebhookSignatureInvalid       Code = "webhook_signature_invalid"
	CodeProductNotFound               Code = "product_not_found"
	CodeCartNotFound                  Code = "cart_not_found"
	CodeOutOfStock                    Code = "out_of_stock"
	CodePriceMismatch                 Code = "price_mismatch"
	CodePreconditionFailed            Code = "precondition_failed"
	CodeRestockExceedsSold            Code = "restock_exceeds_sold"
	CodeWebhookEndpointNotFound       Code = "webhook_endpoint_not_found"
	CodeWebhookSecretsKeyMissing      Code = "webhook_secrets_key_missing"
	CodeBatchTooLarge                 Code = "batch_too_large"
	CodeInstallmentInFlight           Code = "installment_in_flight"
	CodeRefundExceedsFirstInstallment Code = "refund_exceeds_first_installment"
	CodeCardIdentityUnavailable       Code = "card_identity_unavailable"
	CodeRefundedAtProvider            Code = "refunded_at_provider"
	CodeRefundRefused                 Code = "refund_refused"
)

var (
	ErrIdempotencyKeyMissing         = sentinel(CodeIdempotencyKeyMissing)
	ErrIdempotencyKeyInvalid         = sentinel(CodeIdempotencyKeyInvalid)
	ErrMalformedJSON                 = sentinel(CodeMalformedJSON)
	ErrMalformedRequest              = sentinel(CodeMalformedRequest)
	ErrUnauthorized                  = sentinel(CodeUnauthorized)
	ErrPaymentDeclined               = sentinel(CodePaymentDeclined)
	ErrCrossOriginRequest            = sentinel(CodeCrossOriginRequest)
	ErrNotFound                      = sentinel(CodeNotFound)
	ErrOrderNotFound                 = sentinel(CodeOrderNotFound)
	ErrRefundNotFound                = sentinel(CodeRefundNotFound)
	ErrIdempotencyKeyNotFound        = sentinel(CodeIdempotencyKeyNotFound)
	ErrMethodNotAllowed              = sentinel(CodeMethodNotAllowed)
	ErrOrderNotRefundable            = sentinel(CodeOrderNotRefundable)
	ErrPaymentAbandoned              = sentinel(CodePaymentAbandoned)
	ErrIdempotencyKeyInUse           = sentinel(CodeIdempotencyKeyInUse)
	ErrBodyTooLarge                  = sentinel(CodeBodyTooLarge)
	ErrUnsupportedMediaType          = sentinel(CodeUnsupportedMediaType)
	ErrValidationFailed              = sentinel(CodeValidationFailed)
	ErrRefundExceedsCaptured         = sentinel(CodeRefundExceedsCaptured)
	ErrIdempotencyKeyReused          = sentinel(CodeIdempotencyKeyReused)
	ErrIdempotencyKeyExpired         = sentinel(CodeIdempotencyKeyExpired)
	ErrHeadersTooLarge               = sentinel(CodeHeadersTooLarge)
	ErrInternalError                 = sentinel(CodeInternalError)
	ErrTransferEncodingNotSupported  = sentinel(CodeTransferEncodingNotSupported)
	ErrPaymentPending                = sentinel(CodePaymentPending)
	ErrStoreUnavailable              = sentinel(CodeStoreUnavailable)
	ErrCommitUnknown                 = sentinel(CodeCommitUnknown)
	ErrNeedsAttention                = sentinel(CodeNeedsAttention)
	ErrHTTPVersionNotSupported       = sentinel(CodeHTTPVersionNotSupported)
	ErrWebhookSignatureInvalid       = sentinel(CodeWebhookSignatureInvalid)
	ErrProductNotFound               = sentinel(CodeProductNotFound)
	ErrCartNotFound                  = sentinel(CodeCartNotFound)
	ErrOutOfStock                    = sentinel(CodeOutOfStock)
	ErrPriceMismatch                 = sentinel(CodePriceMismatch)
	ErrPreconditionFailed            = sentinel(CodePreconditionFailed)
	ErrRestockExceedsSold            = sentinel(CodeRestockExceedsSold)
	ErrWebhookEndpointNotFound       = sentinel(CodeWebhookEndpointNotFound)
	ErrWebhookSecretsKeyMissing      = sentinel(CodeWebhookSecretsKeyMissing)
	ErrBatchTooLarge                 = sentinel(CodeBatchTooLarge)
	ErrInstallmentInFlight           = sentinel(CodeInstallmentInFlight)
	ErrRefundExceedsFirstInstallment = sentinel(CodeRefundExceedsFirstInstallment)
	ErrCardIdentityUnavailable       = sentinel(CodeCardIdentityUnavailable)
	ErrRefundedAtProvider            = sentinel(CodeRefundedAtProvider)
	ErrRefundRefused                 = sentinel(CodeRefundRefused)
)
