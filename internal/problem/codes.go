package problem

import (
	"maps"
	"net/http"
	"strconv"
)

// Code is a problem's stable, machine-readable code: what clients branch on.
type Code string

// The codes a tekrar client can receive. Each has one row in Codes, which decides
// everything about it that is not particular to one occurrence.
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

// Spec is everything about a code that does not depend on the occurrence: its status, its
// title, what a client that sent an Idempotency-Key may do next, how long it should wait
// before retrying, and what it means (docs/problems.md is generated from Doc).
type Spec struct {
	Code   Code
	Status int
	Title  string
	// Retryable: the same request with the same key may succeed.
	Retryable bool
	// SafeNewKey: a new key cannot cause a second charge. Ignored when PerOccurrence.
	SafeNewKey bool
	// PerOccurrence: safe_new_key depends on the occurrence, so the raiser sets it.
	PerOccurrence bool
	// RetryAfter, in seconds, is sent as Retry-After with every problem of this code.
	RetryAfter int
	Doc        string
}

// Codes is the one table of problem codes, in the order docs/problems.md lists them. A code
// that is not here cannot be raised (Of refuses it), and TestProblemsDoc keeps the
// documentation generated from it.
var Codes = []Spec{
	// Nothing was executed and the request as sent can never succeed: fix it; the same key
	// may be reused for the fixed request, and so may a new one.
	{Code: CodeIdempotencyKeyMissing, Status: http.StatusBadRequest, Title: "Idempotency-Key header required",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "no `Idempotency-Key` on a POST that needs one"},
	{Code: CodeIdempotencyKeyInvalid, Status: http.StatusBadRequest, Title: "Idempotency-Key header invalid",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "not 1-255 visible ASCII characters (bare or as an RFC 8941 `\"string\"`), or sent twice"},
	{Code: CodeMalformedJSON, Status: http.StatusBadRequest, Title: "Request body is not valid JSON",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the body is not one JSON document, is not UTF-8, or an object in it names a member twice"},
	{Code: CodeMalformedRequest, Status: http.StatusBadRequest, Title: "Request is not valid HTTP",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the path or query (or a console form) is not UTF-8 or holds a NUL character, which Postgres cannot store or search for; or the request is not valid HTTP/1.1 (a malformed request line, a header with bytes HTTP does not allow, no `Host`, two different `Content-Length`s), or has both `Content-Length` and `Transfer-Encoding` (the connection is closed)"},
	// Only the payment provider posts to /webhooks/psp (and Stripe to /webhooks/stripe); it resends what it sent.
	{Code: CodeWebhookSignatureInvalid, Status: http.StatusBadRequest, Title: "Webhook signature invalid",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "`POST /webhooks/psp`: the `webhook-signature` does not verify under the provider's secret, a `webhook-*` header is missing, `webhook-timestamp` is more than five minutes from tekrar's clock, or `webhook-id` is not the event's `id`; or `POST /webhooks/stripe`: the `Stripe-Signature` is missing, does not verify under the endpoint's secret or is more than five minutes old; nothing was stored (docs/webhooks-in.md)"},
	{Code: CodeUnauthorized, Status: http.StatusUnauthorized, Title: "Missing or invalid credentials",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "missing or unknown `Authorization: Bearer` secret, or two `Authorization` headers"},
	// A final, stored outcome: a retry replays it; a new key is a new attempt that charges
	// nothing twice (the declined attempt charged nothing).
	{Code: CodePaymentDeclined, Status: http.StatusPaymentRequired, Title: "Payment declined",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the card was declined; `order_id` names the order, kept in status `declined`. Stored and replayed like a success"},
	{Code: CodeRefundedAtProvider, Status: http.StatusConflict, Title: "Already refunded at the provider",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "a refund the payment provider refused because the charge was already refunded there, outside tekrar (its dashboard); tekrar looked the charge up and recorded those refunds on the order, once (`refunded_amount` is the order's now, `refundable` what may still be refunded). Nothing more was refunded. Stored and replayed; refund what remains, if anything, with a new key (docs/providers.md)"},
	{Code: CodeRefundRefused, Status: http.StatusUnprocessableEntity, Title: "Refund refused by the provider",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the payment provider refused the refund for good (`provider_code` says why: the charge is not refundable, unknown to it, or the request invalid); nothing was refunded, the refund is `failed` and its amount is freed on the order. Stored and replayed (docs/providers.md)"},
	{Code: CodeCrossOriginRequest, Status: http.StatusForbidden, Title: "Cross-origin request refused",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "a console form sent from another origin (`Origin`, `Sec-Fetch-Site` or `Referer`; see console.md, Security)"},
	{Code: CodeNotFound, Status: http.StatusNotFound, Title: "Not found",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "no such route"},
	{Code: CodeOrderNotFound, Status: http.StatusNotFound, Title: "Order not found",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "no such order for this client (another client's order is not found, by design; so is anything in an order's place in the path that is not an order id, `ord_…`, such as an integer)"},
	{Code: CodeRefundNotFound, Status: http.StatusNotFound, Title: "Refund not found",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the order has no such refund (anything in a refund's place in the path that is not a refund id, `rf_…`, is not found either)"},
	{Code: CodeProductNotFound, Status: http.StatusNotFound, Title: "Product not found",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "no product with this sku for this client (another client's sku is not found, by design); on `POST /v1/orders`, a `from_stock` line names a sku the client has no product for (`sku` says which)"},
	{Code: CodeCartNotFound, Status: http.StatusNotFound, Title: "Cart not found",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "no cart with this id for this client; on `POST /v1/orders`, `cart_id` names none"},
	{Code: CodeWebhookEndpointNotFound, Status: http.StatusNotFound, Title: "Webhook endpoint not found",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "this client has no such webhook endpoint, or deleted it (another client's endpoint is not found, by design; so is anything in its place in the path that is not an endpoint id, `we_…`)"},
	{Code: CodeIdempotencyKeyNotFound, Status: http.StatusNotFound, Title: "Idempotency key not found",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "this client never sent this key, or it was forgotten after its retention"},
	{Code: CodeMethodNotAllowed, Status: http.StatusMethodNotAllowed, Title: "Method not allowed",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the route exists with another method"},
	{Code: CodeOrderNotRefundable, Status: http.StatusConflict, Title: "Order cannot be refunded",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "only a paid or partially refunded order can be refunded"},
	// Installment plans (docs/installments.md). Nothing was stored, the key included.
	{Code: CodeInstallmentInFlight, Status: http.StatusConflict, Title: "An installment is being charged",
		Retryable: true, SafeNewKey: true, PerOccurrence: false, RetryAfter: 5,
		Doc: "a refund of an order paid in installments arrived while one of its installments was being charged; send it again (with the same key) once that charge is recorded, which `Retry-After` estimates"},
	{Code: CodeRefundExceedsFirstInstallment, Status: http.StatusConflict, Title: "Refund exceeds the first installment",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "an order paid in installments is refunded from its first installment's charge, so its refunds cannot add up to more than that installment; the unpaid installments are canceled by any refund"},
	// Stock and prices, checked in the claim itself: nothing was stored, the key included,
	// so the same key may be sent again once the product allows it.
	{Code: CodeOutOfStock, Status: http.StatusConflict, Title: "Out of stock",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "a `from_stock` line asks for more than the product has; `sku` and `available` say which and how many are left. Nothing was stored or charged, the key included"},
	{Code: CodePriceMismatch, Status: http.StatusConflict, Title: "Price does not match the product",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "a `from_stock` line's `unit_amount` (or the order's currency) is not the product's price now; `sku`, `price` and `currency` say what it is. Nothing was stored or charged, the key included"},
	// The completer canceled an abandoned order: nothing was charged, or what still is gets
	// refunded.
	{Code: CodePaymentAbandoned, Status: http.StatusConflict, Title: "Payment abandoned",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the request was interrupted before the card was charged and not retried in time (or retried once the payment provider would charge a repeat anew: past its key window, or without keys): the completer, an operator's release or that retry canceled the order, named by `order_id`. When the payment provider canceled the charge key first, `detail` says nothing was charged; with a provider that cannot, it says that a charge the provider still completes is refunded in full automatically (docs/recovery.md). Stored and replayed; pay again with a new key"},
	// The outcome is not known yet: retry with the same key, never a new one.
	{Code: CodeIdempotencyKeyInUse, Status: http.StatusConflict, Title: "A request with this key is still in progress",
		Retryable: true, SafeNewKey: false, PerOccurrence: false, RetryAfter: 1,
		Doc: "the first request with this key is still running; retry after `Retry-After`, or send `Prefer: wait=N`"},
	{Code: CodePreconditionFailed, Status: http.StatusPreconditionFailed, Title: "Precondition failed",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "`If-Match` names a version that is not the current one (someone changed the product or cart since you read it: read it again, `ETag` has the version), or `If-None-Match: *` on one that exists; nothing was changed"},
	{Code: CodeBodyTooLarge, Status: http.StatusRequestEntityTooLarge, Title: "Request body too large",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the body is over `TEKRAR_MAX_BODY_BYTES` (64 KiB by default); a console form over 64 KiB"},
	{Code: CodeBatchTooLarge, Status: http.StatusRequestEntityTooLarge, Title: "Batch too large",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "`POST /v1/pos/sales`: more sales than a batch may hold (`max_sales`, 500) or a body over `max_bytes` (4 MiB); nothing of the batch ran. Send the queue in several batches (docs/pos.md)"},
	{Code: CodeUnsupportedMediaType, Status: http.StatusUnsupportedMediaType, Title: "Unsupported media type",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the body is not `application/json`; a console form that is not `application/x-www-form-urlencoded`"},
	{Code: CodeValidationFailed, Status: http.StatusUnprocessableEntity, Title: "Validation failed",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "`errors` lists each field and what is wrong (text fields may not hold U+0000, which Postgres cannot store); nothing was stored, so the fixed request may reuse the key"},
	{Code: CodeRefundExceedsCaptured, Status: http.StatusUnprocessableEntity, Title: "Refund exceeds what was captured",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "this refund, with the others of the order (counting those in progress), would exceed what was captured"},
	{Code: CodeRestockExceedsSold, Status: http.StatusUnprocessableEntity, Title: "Restock exceeds what the order sold",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "a refund's `restock` asks to put back more of a sku than the order took from stock, counting what its earlier refunds put back; `sku` and `restockable` say which and how many"},
	// The key already stands for another request, or for a request that has expired: its
	// effect may exist. The refused request was not executed, but tekrar cannot tell a new
	// purchase from a retry of the first one whose body changed (a client's bug, another
	// amount), for which a new key would charge twice: safe_new_key is false, and the text
	// offers a new key only for what the client knows is a new purchase.
	{Code: CodeIdempotencyKeyReused, Status: http.StatusUnprocessableEntity, Title: "Idempotency key reused with another request",
		Retryable: false, SafeNewKey: false, PerOccurrence: false, RetryAfter: 0,
		Doc: "the key was first used for another request (other body, other endpoint); nothing was executed. A retry of that first request must resend its body; only a request the client knows to be a new purchase may go under another key"},
	{Code: CodeIdempotencyKeyExpired, Status: http.StatusUnprocessableEntity, Title: "Idempotency key expired",
		Retryable: false, SafeNewKey: false, PerOccurrence: true, RetryAfter: 0,
		Doc: "the key expired (or was swept and its tombstone is in its grace period); `order_id`, `first_seen` and `expired_at` say what it was. `safe_new_key` is false when this is the same purchase as the expired one, true when it is another purchase under an old key"},
	{Code: CodeHeadersTooLarge, Status: http.StatusRequestHeaderFieldsTooLarge, Title: "Request headers too large",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "the request line and headers are over 64 KiB; the connection is closed"},
	{Code: CodeInternalError, Status: http.StatusInternalServerError, Title: "Internal server error",
		Retryable: true, SafeNewKey: false, PerOccurrence: false, RetryAfter: 0,
		Doc: "a bug; the log has the details under the `X-Request-Id`"},
	{Code: CodeTransferEncodingNotSupported, Status: http.StatusNotImplemented, Title: "Transfer encoding not supported",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "a `Transfer-Encoding` other than one `chunked`; the connection is closed"},
	{Code: CodePaymentPending, Status: http.StatusServiceUnavailable, Title: "Payment outcome not known yet",
		Retryable: true, SafeNewKey: false, PerOccurrence: false, RetryAfter: 1,
		Doc: "the provider did not answer in time or failed: the charge may exist. Retry with the same key: tekrar looks the charge up before charging"},
	{Code: CodeStoreUnavailable, Status: http.StatusServiceUnavailable, Title: "Database unavailable",
		Retryable: true, SafeNewKey: false, PerOccurrence: false, RetryAfter: 2,
		Doc: "the database is unreachable; tekrar failed closed and executed nothing it could not record"},
	{Code: CodeCommitUnknown, Status: http.StatusServiceUnavailable, Title: "Outcome not known yet",
		Retryable: true, SafeNewKey: false, PerOccurrence: false, RetryAfter: 2,
		Doc: "the database connection was lost while tekrar committed what it had done: it may stand or not (under synchronous replication, on the primary alone). The key is left as it is, for a retry with the same key or the completer to finish it once; a new key could pay twice"},
	{Code: CodeCardIdentityUnavailable, Status: http.StatusServiceUnavailable, Title: "Card could not be identified",
		Retryable: true, SafeNewKey: false, PerOccurrence: true, RetryAfter: 2,
		Doc: "`POST /v1/orders`: the payment provider could not say which card `payment.card_token` is, which tekrar needs to tell a new token of the same card from another card (docs/fingerprints.md); nothing was executed. Retry with the same key. only a retry with a new token asks (a first request's card comes from its charge's answer), so `safe_new_key` is false: a key is stored"},
	{Code: CodeNeedsAttention, Status: http.StatusServiceUnavailable, Title: "This request needs an operator",
		Retryable: true, SafeNewKey: false, PerOccurrence: false, RetryAfter: 1,
		Doc: "the outcome could not be resolved automatically and an operator is on it"},
	// The operator must configure tekrar; nothing the client changes helps.
	{Code: CodeWebhookSecretsKeyMissing, Status: http.StatusServiceUnavailable, Title: "Webhook signing is not configured",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "`POST /v1/webhook-endpoints` and `rotate-secret`: this tekrar has no `TEKRAR_SECRETS_KEY`, which endpoint signing secrets are encrypted under; nothing was stored. Ask the operator (docs/webhooks-out.md)"},
	{Code: CodeHTTPVersionNotSupported, Status: http.StatusHTTPVersionNotSupported, Title: "HTTP version not supported",
		Retryable: false, SafeNewKey: true, PerOccurrence: false, RetryAfter: 0,
		Doc: "an HTTP version other than 1.x on an HTTP/1 connection; the connection is closed"},
}

var specs = func() map[Code]Spec {
	m := make(map[Code]Spec, len(Codes))
	for _, s := range Codes {
		m[s.Code] = s
	}
	return m
}()

// Lookup returns the table's row for code.
func Lookup(code Code) (Spec, bool) {
	s, ok := specs[code]
	return s, ok
}

// Of returns a new problem of code with the table's status and title. A code that is not in
// the table is a programming error: the client gets internal_error rather than a problem
// nobody documented.
func Of(code Code) *Problem {
	s, ok := specs[code]
	if !ok {
		s = specs[CodeInternalError]
	}
	return &Problem{Status: s.Status, Code: s.Code, Title: s.Title}
}

// Advised adds retryable and safe_new_key, from the table, to a problem answered to a
// request that carries an Idempotency-Key. A problem that already says (a code whose
// safe_new_key depends on the occurrence) keeps what it says.
//
// It returns a copy and leaves p as it was, so that a domain's sentinel (a problem shared by
// every request, like checkout.ErrOrderNotFound) can be advised and answered.
func (p *Problem) Advised() *Problem {
	if _, ok := p.Extensions["retryable"]; ok {
		return p
	}
	s, ok := specs[p.Code]
	if !ok {
		s = Spec{Retryable: p.Status >= 500}
	}
	q := *p
	q.Extensions = maps.Clone(p.Extensions)
	return q.With("retryable", s.Retryable).With("safe_new_key", s.SafeNewKey)
}

// Unadvised is a copy of p without retryable and safe_new_key, for the answer to a request
// that carries no Idempotency-Key (a GET, a DELETE): that advice speaks of a key the request
// has not got. The domain advises the problems it makes, as most are answered to keyed
// requests; the API strips the advice where it does not apply.
func (p *Problem) Unadvised() *Problem {
	q := *p
	q.Extensions = maps.Clone(p.Extensions)
	delete(q.Extensions, "retryable")
	delete(q.Extensions, "safe_new_key")
	return &q
}

// Is makes a problem an error that errors.Is matches by code: a domain declares the
// problems its callers test for as sentinels (var ErrOrderNotFound = problem.Of(...)), and
// every problem of that code, with whatever detail, is that error. One condition, one
// error: the API answers it as it is, a console page tests for it.
func (p *Problem) Is(target error) bool {
	t, ok := target.(*Problem)
	return ok && t != nil && t.Code == p.Code
}

// retryAfter is the Retry-After header value of code, "" for none.
func retryAfter(code Code) string {
	if s, ok := specs[code]; ok && s.RetryAfter > 0 {
		return strconv.Itoa(s.RetryAfter)
	}
	return ""
}

// The problems the HTTP plumbing raises most, as shorthands.

// NotFound is a route that does not exist.
func NotFound() *Problem { return Of(CodeNotFound) }

// MethodNotAllowed is a route that exists with another method.
func MethodNotAllowed() *Problem { return Of(CodeMethodNotAllowed) }

// Unauthorized is a missing, malformed or unknown client secret.
func Unauthorized() *Problem {
	return Of(CodeUnauthorized).WithDetail("send the client secret as 'Authorization: Bearer <secret>'")
}

// Internal is a bug: the details are in the log under the request id, never in the
// response.
func Internal() *Problem { return Of(CodeInternalError) }
