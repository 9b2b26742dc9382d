package psp

import (
	"math"
	"slices"
	"time"
)

// What each payment provider promises.
//
// tekrar's recovery leans on what the provider does with a key: whether a re-sent charge is
// answered by the first one, for how long, whether a charge still in flight can be fenced,
// and how a charge whose answer was lost can be found again. The sandbox promises the most
// (keys kept for ever, a cancel by key, a look-up by key); real providers promise less, and
// each differently. A Capability is one provider's promises as its public documentation
// states them, and the functions below (MayResend, MustLookUpFirst, CanFence, LookUpBy,
// LookUpComplete) are the decisions the recovery reads from it, so that a rule such as
// "never re-send past the window" is written once, in one place.
//
// docs/providers.md ("What each provider promises") lists the same rows, with the pages
// they were checked against; TestProviderCapabilities keeps the two equal. A promise the
// docs do not state is recorded as not documented, and every decision treats it as not
// promised: a guess would be a double charge waiting for the day it is wrong.

// Support says whether a provider offers a feature.
type Support string

const (
	SupportYes           Support = "yes"
	SupportNo            Support = "no"
	SupportNotDocumented Support = "not documented"
)

// Durations a provider states without a number.
const (
	// DurationForever: keys that never expire, deliveries retried until acknowledged.
	DurationForever time.Duration = math.MaxInt64
	// DurationNotDocumented: the provider's docs state no duration; a decision reads it as
	// the shortest one (a key window: already passed).
	DurationNotDocumented time.Duration = -1
)

// KeyStore is what a provider keeps under an idempotency key, and so what a repeat of the
// key is answered with.
type KeyStore string

const (
	// StoresEveryAnswer: the first answer, errors included (Stripe keeps a 500): a repeat
	// replays it, so a repeat cannot settle an error answer; only a look-up can.
	StoresEveryAnswer KeyStore = "every answer"
	// StoresOnly2xx: only a success; after a 4xx or 5xx the key is free and a repeat is a new
	// attempt, safe only because the provider says the failed one was not processed.
	StoresOnly2xx KeyStore = "only 2xx"
	// StoresCurrentState: a repeat is answered with the state of the request's intent now.
	StoresCurrentState KeyStore = "current state"
	// StoresNothing: the provider has no keys; a repeat is a new charge.
	StoresNothing       KeyStore = "nothing"
	StoresNotDocumented KeyStore = "not documented"
)

// Fence is how a provider can stop a charge whose answer tekrar never got.
type Fence string

const (
	// FenceCancelByKey: a cancel under the charge's key after which no charge can be made
	// under it, one still in flight included (the sandbox's CancelCharge).
	FenceCancelByKey Fence = "cancel by key"
	// FenceCancelByID: the charge is an object created before it is confirmed (Stripe's
	// PaymentIntent, created under the key, so a repeat finds its id); cancelling it refuses
	// a confirmation still in flight.
	FenceCancelByID Fence = "cancel by id"
	// FenceVoidByKey: a cancel by key that voids a payment found under it; with none found
	// nothing happens, and the docs do not say a later arrival is refused (Square).
	FenceVoidByKey Fence = "void by key"
	// FenceVoidByReference: a void of a payment named by the merchant's reference, for when
	// its id was lost (Adyen's technical cancel); a later arrival is not said to be refused.
	FenceVoidByReference Fence = "void by reference"
	// FenceVoidByID: a void of a charge whose id tekrar has: a refund by other means, not a
	// fence against a charge in flight.
	FenceVoidByID      Fence = "void by id"
	FenceNone          Fence = "none"
	FenceNotDocumented Fence = "not documented"
)

// SignatureScheme is how a provider signs its webhooks.
type SignatureScheme string

const (
	SignedStandardWebhooks SignatureScheme = "Standard Webhooks" // HMAC-SHA256 of id.timestamp.body
	SignedHMACSHA256       SignatureScheme = "HMAC-SHA256"
	SignedRSASHA256        SignatureScheme = "RSA-SHA256" // a certificate, or the provider's verify API
	SignedSDK              SignatureScheme = "verified by the SDK"
)

// Decision is what tekrar makes of a provider's answer to a charge.
type Decision string

const (
	// DecisionDecline: nothing was charged and nothing will be under this key.
	DecisionDecline Decision = "final decline"
	// DecisionRetry: the provider says nothing happened and the same key may be sent again.
	DecisionRetry Decision = "retry same key"
	// DecisionUnknown: a charge may have been made: look it up before any re-send.
	DecisionUnknown Decision = "outcome unknown"
	// DecisionRefused: the provider refused what tekrar sent (malformed, or a key or
	// reference used already): the answer table says whether to look up or ask an operator.
	DecisionRefused Decision = "refused as sent"
)

// ErrorRule maps one documented answer of a provider to a charge onto tekrar's decision.
type ErrorRule struct {
	// Answer is the provider's answer as its docs name it: status, error type or code, header.
	Answer string
	// Err is what the provider's adapter returns for it: nil for a declined charge (a result,
	// not an error), one of this package's definitive errors, or any other error.
	Err      error
	Decision Decision
}

// Verdict is the rule's row of the charge answer table (AnswerOf): the table decides what
// becomes of the key; the rule only says which row the provider's answer is.
func (r ErrorRule) Verdict() Verdict { return AnswerOf(OpCharge, r.Err).Verdict }

// WebhookSignature is how a provider's webhook is signed and where the signature travels.
type WebhookSignature struct {
	Scheme SignatureScheme
	Where  string // the header (or field) that carries it
}

// Capability is one provider's promises.
type Capability struct {
	Provider string
	// KeysReplay: a charge repeated under its key is answered by the first one.
	KeysReplay Support
	// KeyWindow is how long the provider keeps a key: 0 without keys, DurationForever,
	// or DurationNotDocumented. Past it a repeat is a new charge.
	KeyWindow time.Duration
	KeyStores KeyStore
	Fence     Fence
	// How a charge whose answer was lost can be found: by its key, by the merchant's
	// reference (order id, conversationId), or by listing the charges of a window.
	FindByKey, FindByReference, FindByListing Support
	// FindLag is how long after a charge LookUpBy's way may still miss it (a search that is
	// eventually consistent): 0 when a look-up reads what was written, DurationNotDocumented.
	FindLag time.Duration
	Webhook WebhookSignature
	// WebhookRetries is how long a failed delivery is retried, so how late an event may
	// arrive; WebhookSchedule is the schedule as documented.
	WebhookRetries  time.Duration
	WebhookSchedule string
	// Errors are the provider's documented answers to a charge, each with its decision.
	Errors []ErrorRule
	// Sources are the pages the row was checked against.
	Sources []string
}

// The providers the table describes.
const (
	ProviderSandbox         = "sandbox"
	ProviderSandboxNoCancel = "sandbox --no-cancel"
	ProviderSandboxKeyLess  = "sandbox --keyless"
	ProviderStripe          = "stripe"
	ProviderAdyen           = "adyen"
	ProviderPayPal          = "paypal (orders v2)"
	ProviderSquare          = "square"
	ProviderBraintree       = "braintree"
	ProviderCheckoutCom     = "checkout.com"
	ProviderIyzico          = "iyzico"
)

const day = 24 * time.Hour

// sandboxErrors are the sandbox's answers to a charge, over HTTP (http.go) and in process.
var sandboxErrors = []ErrorRule{
	{"200, status declined (card_declined, invalid_card)", nil, DecisionDecline},
	{"409 key_canceled", ErrKeyCanceled, DecisionDecline},
	{"409 key_reused", ErrKeyReused, DecisionRefused},
	{"400 bad_request", ErrInvalidRequest, DecisionRefused},
	{"502 provider_error, 504 provider_timeout, no answer", errUnknownAnswer, DecisionUnknown},
}

// sandboxKeyLessErrors are the key-less sandbox's answers to a charge: it keeps no key, so
// none is refused as canceled or reused.
var sandboxKeyLessErrors = []ErrorRule{
	{"200, status declined (card_declined, invalid_card)", nil, DecisionDecline},
	{"400 bad_request", ErrInvalidRequest, DecisionRefused},
	{"502 provider_error, 504 provider_timeout, no answer", errUnknownAnswer, DecisionUnknown},
}

// capabilities is the table, in the order docs/providers.md lists it.
var capabilities = []Capability{
	{
		// tekrar's own card processor: what the recovery was written against.
		Provider:   ProviderSandbox,
		KeysReplay: SupportYes, KeyWindow: DurationForever, KeyStores: StoresOnly2xx,
		Fence:     FenceCancelByKey,
		FindByKey: SupportYes, FindByReference: SupportNo, FindByListing: SupportYes,
		FindLag:         0,
		Webhook:         WebhookSignature{SignedStandardWebhooks, "webhook-signature"},
		WebhookRetries:  DurationForever,
		WebhookSchedule: "until acknowledged: 100 ms doubling, capped at MaxBackoff (1 min)",
		Errors:          sandboxErrors,
		Sources:         []string{"checkout/psp/sandbox.go", "checkout/psp/webhooks.go"},
	},
	{
		// `tekrar psp --no-cancel`: the sandbox without its fence.
		Provider:   ProviderSandboxNoCancel,
		KeysReplay: SupportYes, KeyWindow: DurationForever, KeyStores: StoresOnly2xx,
		Fence:     FenceNone,
		FindByKey: SupportYes, FindByReference: SupportNo, FindByListing: SupportYes,
		FindLag:         0,
		Webhook:         WebhookSignature{SignedStandardWebhooks, "webhook-signature"},
		WebhookRetries:  DurationForever,
		WebhookSchedule: "until acknowledged: 100 ms doubling, capped at MaxBackoff (1 min)",
		Errors:          sandboxErrors,
		Sources:         []string{"checkout/psp/sandbox.go (SandboxOptions.NoCancel)"},
	},
	{
		// `tekrar psp --keyless`: the sandbox as iyzico documents its services. A repeated
		// charge is a new charge; a charge is found by its reference (ChargesByReference)
		// or by listing, never by key; nothing can be canceled.
		Provider:   ProviderSandboxKeyLess,
		KeysReplay: SupportNo, KeyWindow: 0, KeyStores: StoresNothing,
		Fence:     FenceNone,
		FindByKey: SupportNo, FindByReference: SupportYes, FindByListing: SupportYes,
		FindLag:         0,
		Webhook:         WebhookSignature{SignedStandardWebhooks, "webhook-signature"},
		WebhookRetries:  KeyLessWebhookFirstAfter + (KeyLessWebhookMaxAttempts-1)*KeyLessWebhookRetryEvery,
		WebhookSchedule: "first after 10 s, then every 15 min, at most 3 attempts",
		Errors:          sandboxKeyLessErrors,
		Sources: []string{
			"checkout/psp/sandbox.go (SandboxOptions.KeyLess)",
			"https://docs.iyzico.com/en/getting-started/preliminaries/idempotency",
		},
	},
	{
		// Keys "can be removed once at least 24 hours old"; the first answer is saved once
		// the endpoint began, 500s included, so a repeat replays a 500 rather than settle it.
		// Search is eventually consistent: "less than a minute", "up to an hour" during outages.
		Provider:   ProviderStripe,
		KeysReplay: SupportYes, KeyWindow: 24 * time.Hour, KeyStores: StoresEveryAnswer,
		Fence:     FenceCancelByID,
		FindByKey: SupportNo, FindByReference: SupportYes, FindByListing: SupportYes,
		FindLag:         time.Hour,
		Webhook:         WebhookSignature{SignedHMACSHA256, "Stripe-Signature"},
		WebhookRetries:  3 * day,
		WebhookSchedule: "live mode: exponential backoff for up to 3 days; test mode: 3 times over a few hours",
		Errors: []ErrorRule{
			{"402 card_error (decline_code)", nil, DecisionDecline},
			{"400 invalid_request_error", ErrInvalidRequest, DecisionRefused},
			{"idempotency_error (key reused with other parameters)", ErrKeyReused, DecisionRefused},
			{"429, or Stripe-Should-Retry: true", errUnknownAnswer, DecisionRetry},
			{"500 api_error (saved under the key)", errUnknownAnswer, DecisionUnknown},
			{"no answer (network error)", errUnknownAnswer, DecisionRetry},
		},
		Sources: []string{
			"https://docs.stripe.com/api/idempotent_requests",
			"https://docs.stripe.com/error-low-level",
			"https://docs.stripe.com/api/errors",
			"https://github.com/stripe/stripe-python/pull/621",
			"https://docs.stripe.com/api/payment_intents/search",
			"https://docs.stripe.com/api/payment_intents/list",
			"https://docs.stripe.com/webhooks",
		},
	},
	{
		// Keys "valid for a minimum period of 31 days after first submission". The payment
		// is cancelled by pspReference, or by the merchant's reference when the answer was
		// lost (technical cancel); no API finds a payment by reference or lists a window.
		Provider:   ProviderAdyen,
		KeysReplay: SupportYes, KeyWindow: 31 * day, KeyStores: StoresNotDocumented,
		Fence:     FenceVoidByReference,
		FindByKey: SupportNo, FindByReference: SupportNotDocumented, FindByListing: SupportNotDocumented,
		FindLag:         DurationNotDocumented,
		Webhook:         WebhookSignature{SignedHMACSHA256, "additionalData.hmacSignature"},
		WebhookRetries:  30 * day,
		WebhookSchedule: "3 at once, then queued up to 30 days: 2, 5, 10, 15, 30 min, 1, 2, 4, 8 h",
		Errors: []ErrorRule{
			{"resultCode Refused", nil, DecisionDecline},
			{"resultCode Error", nil, DecisionDecline},
			{"resultCode Cancelled", nil, DecisionDecline},
			{"resultCode Received or Pending (outcome by webhook)", errUnknownAnswer, DecisionUnknown},
			{"422 validation error (errorCode)", ErrInvalidRequest, DecisionRefused},
			{"500", errUnknownAnswer, DecisionUnknown},
			{"no answer (timeout)", errUnknownAnswer, DecisionRetry},
		},
		Sources: []string{
			"https://docs.adyen.com/development-resources/api-idempotency",
			"https://docs.adyen.com/online-payments/classic-integrations/modify-payments/cancel",
			"https://docs.adyen.com/development-resources/overview-response-handling",
			"https://docs.adyen.com/development-resources/webhooks/troubleshoot",
			"https://docs.adyen.com/development-resources/webhooks/verify-hmac-signatures",
		},
	},
	{
		// PayPal-Request-Id: "The server stores keys for 6 hours" (up to 72 on request to
		// the account manager); a repeat "returns the latest status of the previous request".
		Provider:   ProviderPayPal,
		KeysReplay: SupportYes, KeyWindow: 6 * time.Hour, KeyStores: StoresCurrentState,
		Fence:     FenceNotDocumented,
		FindByKey: SupportNo, FindByReference: SupportNotDocumented, FindByListing: SupportNotDocumented,
		FindLag:         DurationNotDocumented,
		Webhook:         WebhookSignature{SignedRSASHA256, "PAYPAL-TRANSMISSION-SIG"},
		WebhookRetries:  3 * day,
		WebhookSchedule: "up to 25 times over 3 days",
		Errors: []ErrorRule{
			{"422 INSTRUMENT_DECLINED", nil, DecisionDecline},
			{"422 DUPLICATE_INVOICE_ID", ErrKeyReused, DecisionRefused},
			{"VALIDATION_ERROR, UNPROCESSABLE_ENTITY (invalid data)", ErrInvalidRequest, DecisionRefused},
			{"5xx, or network timeout", errUnknownAnswer, DecisionRetry},
		},
		Sources: []string{
			"https://developer.paypal.com/api/orders/v2/orders-authorize",
			"https://developer.paypal.com/reference/guidelines/idempotency",
			"https://developer.paypal.com/api/handle-payment-failures",
			"https://www.paypal.com/pm/cshelp/article/understanding-error-unprocessable-entity-help1222",
			"https://developer.paypal.com/api/rest/webhooks/rest",
		},
	},
	{
		// Square "does not publish a retention period" for CreatePayment keys.
		// CancelPaymentByIdempotencyKey voids the payment under the key; "if no payment with
		// the specified idempotency key is found, no action is taken".
		Provider:   ProviderSquare,
		KeysReplay: SupportYes, KeyWindow: DurationNotDocumented, KeyStores: StoresNotDocumented,
		Fence:     FenceVoidByKey,
		FindByKey: SupportNo, FindByReference: SupportNotDocumented, FindByListing: SupportYes,
		FindLag:         DurationNotDocumented,
		Webhook:         WebhookSignature{SignedHMACSHA256, "x-square-hmacsha256-signature"},
		WebhookRetries:  3 * day,
		WebhookSchedule: "retried for up to 72 hours (an older page: 24 hours)",
		Errors: []ErrorRule{
			{"PAYMENT_METHOD_ERROR: CARD_DECLINED, GENERIC_DECLINE", nil, DecisionDecline},
			{"key used already, with other request data", ErrKeyReused, DecisionRefused},
			{"500 INTERNAL_SERVER_ERROR, or no answer", errUnknownAnswer, DecisionUnknown},
		},
		Sources: []string{
			"https://developer.squareup.com/docs/working-with-apis/idempotency",
			"https://developer.squareup.com/explorer/square/payments-api/CancelPaymentByIdempotencyKey",
			"https://developer.squareup.com/forums/t/how-long-are-idempotency-keys-retained-for-the-createpayment-endpoint/28303",
			"https://developer.squareup.com/reference/square/payments/ListPayments",
			"https://developer.squareup.com/docs/webhooks/troubleshooting",
			"https://developer.squareup.com/docs/webhooks/step2subscribe",
		},
	},
	{
		// GraphQL only: "each identical request within a 30-day window will return the
		// current state of that request's intent" (ApiRequestKey).
		Provider:   ProviderBraintree,
		KeysReplay: SupportYes, KeyWindow: 30 * day, KeyStores: StoresCurrentState,
		Fence:     FenceVoidByID,
		FindByKey: SupportNo, FindByReference: SupportNotDocumented, FindByListing: SupportYes,
		FindLag:         DurationNotDocumented,
		Webhook:         WebhookSignature{SignedSDK, "bt_signature"},
		WebhookRetries:  DurationNotDocumented,
		WebhookSchedule: "no schedule on the pages checked",
		Errors: []ErrorRule{
			{"processor response 2000-2999 (declined)", nil, DecisionDecline},
			{"processor response 3000-3999 (processing network)", nil, DecisionDecline},
			{"validation errors (no transaction)", ErrInvalidRequest, DecisionRefused},
			{"no answer (network failure)", errUnknownAnswer, DecisionRetry},
		},
		Sources: []string{
			"https://developer.paypal.com/braintree/graphql/integration_guides/idempotency",
			"https://developer.paypal.com/braintree/docs/reference/request/transaction/void/",
			"https://developer.paypal.com/braintree/graphql/reference/types/search-transaction-status-transition-input",
			"https://developer.paypal.com/braintree/docs/reference/general/processor-responses/authorization-responses",
			"https://developer.paypal.com/braintree/docs/guides/webhooks/parse",
		},
	},
	{
		// Cko-Idempotency-Key: "cached in our system if the request returns a 2xx"; keys
		// "expire after 24 hours" (another page of the same docs says 72: the shorter is kept).
		Provider:   ProviderCheckoutCom,
		KeysReplay: SupportYes, KeyWindow: 24 * time.Hour, KeyStores: StoresOnly2xx,
		Fence:     FenceVoidByID,
		FindByKey: SupportNo, FindByReference: SupportYes, FindByListing: SupportNotDocumented,
		FindLag:         DurationNotDocumented,
		Webhook:         WebhookSignature{SignedHMACSHA256, "Cko-Signature"},
		WebhookRetries:  DurationNotDocumented,
		WebhookSchedule: "no schedule on the pages checked",
		Errors: []ErrorRule{
			{"response_code 20xxx (soft decline)", nil, DecisionDecline},
			{"response_code 30xxx (hard decline)", nil, DecisionDecline},
			{"response_code 40xxx (risk)", nil, DecisionDecline},
			{"422 (error_codes)", ErrInvalidRequest, DecisionRefused},
			{"5xx (not saved: a repeat is a new attempt)", errUnknownAnswer, DecisionUnknown},
			{"no answer (network error, timeout)", errUnknownAnswer, DecisionRetry},
		},
		Sources: []string{
			"https://www.checkout.com/docs/payments/manage-payments/idempotency",
			"https://www.checkout.com/docs/developer-resources/api/idempotency",
			"https://checkout.com/docs/payments/manage-payments/get-a-list-of-payments",
			"https://checkout.com/docs/resources/codes/api-response-codes",
			"https://checkout.com/docs/workflows/set-up-your-webhook-receiver",
		},
	},
	{
		// "Majority of iyzico services have designed non-idempotent": no keys; a payment is
		// retrieved by paymentId or paymentConversationId, cancelled by paymentId.
		Provider:   ProviderIyzico,
		KeysReplay: SupportNo, KeyWindow: 0, KeyStores: StoresNothing,
		Fence:     FenceVoidByID,
		FindByKey: SupportNo, FindByReference: SupportYes, FindByListing: SupportNotDocumented,
		FindLag:         DurationNotDocumented,
		Webhook:         WebhookSignature{SignedHMACSHA256, "X-IYZ-SIGNATURE-V3"},
		WebhookRetries:  45 * time.Minute,
		WebhookSchedule: "first after 10-15 s, then every 15 min, stopping after 3 attempts",
		Errors: []ErrorRule{
			{"status failure, bank errorCode 10xxx (10051 NOT_SUFFICIENT_FUNDS)", nil, DecisionDecline},
			{"5xx, or no answer", errUnknownAnswer, DecisionUnknown},
		},
		Sources: []string{
			"https://docs.iyzico.com/en/getting-started/preliminaries/idempotency",
			"https://docs.iyzico.com/v/en/advanced/retrieve-payment",
			"https://docs.iyzico.com/en/advanced/webhook",
			"https://docs.iyzico.com/en/add-ons/error-codes",
		},
	},
}

// Capabilities is the table, one row per provider, in the order docs/providers.md lists it.
func Capabilities() []Capability { return slices.Clone(capabilities) }

// CapabilityOf is the row of provider, and false for a provider the table does not name.
func CapabilityOf(provider string) (Capability, bool) {
	for _, c := range capabilities {
		if c.Provider == provider {
			return c, true
		}
	}
	return Capability{}, false
}

// resendMargin is how much of a key window tekrar leaves unused: since is measured on
// tekrar's clock from its first send, and the provider's window on another clock from its
// first receipt; a tenth of the window, at most ten minutes, covers the difference.
func resendMargin(window time.Duration) time.Duration { return min(window/10, 10*time.Minute) }

// MayResend reports whether a charge first sent since ago may be sent again under the same
// key and be answered by the first one: the provider replays keys, and its window is known
// and has not passed (less a margin). Past the window a re-send is a new charge, so a
// provider without keys, or whose window is not documented, never may.
func MayResend(c Capability, since time.Duration) bool {
	if c.KeysReplay != SupportYes || c.KeyWindow <= 0 {
		return false
	}
	since = max(since, 0)
	if c.KeyWindow == DurationForever {
		return true
	}
	return since < c.KeyWindow-resendMargin(c.KeyWindow)
}

// MustLookUpFirst reports whether a charge whose answer was lost must be looked up (by
// LookUpBy's way) and reconciled before anything is sent: whenever a re-send might not be
// answered by the first charge. It is MayResend's negation, named for the caller that
// decides to look, so that the two can never disagree.
func MustLookUpFirst(c Capability, since time.Duration) bool { return !MayResend(c, since) }

// CanFence reports whether giving up on a charge can be made safe at the provider: after a
// confirmed cancel no charge can be made, one in flight included. A void (by id, by key or by
// reference) only reverses a charge already there, so a provider with nothing better must
// owe a refund of whatever appears (docs/recovery.md, Giving up on a charge).
func CanFence(c Capability) bool { return c.Fence == FenceCancelByKey || c.Fence == FenceCancelByID }

// LookUp is a way to find a charge whose answer was lost.
type LookUp string

const (
	LookUpByKey       LookUp = "by key"
	LookUpByReference LookUp = "by reference"
	LookUpByListing   LookUp = "by listing"
	// LookUpNone: the provider offers no way; only its webhooks and an operator can tell.
	LookUpNone LookUp = "none"
)

// LookUpBy is the most precise way the provider documents to find a charge: its key names
// exactly the request, a reference names the order (tekrar's derived key can be sent as
// both), and a listing must be matched by amount and description.
func LookUpBy(c Capability) LookUp {
	switch {
	case c.FindByKey == SupportYes:
		return LookUpByKey
	case c.FindByReference == SupportYes:
		return LookUpByReference
	case c.FindByListing == SupportYes:
		return LookUpByListing
	}
	return LookUpNone
}

// LookUpComplete reports whether a look-up made since after a charge was sent sees it if it
// was made: the provider's look-up reads what was written, or its documented lag has passed.
// Until then "not found" is not even "not yet", and with a lag that is not documented it
// never is: only a fence, or the provider's horizon, settles such a charge.
func LookUpComplete(c Capability, since time.Duration) bool {
	return LookUpBy(c) != LookUpNone && c.FindLag >= 0 && since >= c.FindLag
}
