// Package psp is tekrar's side of the payment service provider: the Provider interface the
// checkout engine charges through, a sandbox card processor with its own Postgres ledger,
// and an HTTP transport so that the sandbox can run as its own process (`tekrar psp`) and be
// reached exactly as a remote processor would be.
//
// # Outcomes
//
// Every Charge and Refund carries a provider-side idempotency key; the provider charges (or
// refunds) at most once per key. A call ends in one of three ways:
//
//   - a result: the charge succeeded or was declined (a decline is a result, not an error);
//   - a definitive error: ErrKeyReused, ErrRefundExceedsCharge, ErrNotRefundable,
//     ErrInvalidRequest, ErrNotFound, ErrKeyCanceled or ErrCancelUnsupported — the provider
//     answered and nothing happened;
//   - any other error, including a cancelled or expired context: the OUTCOME IS UNKNOWN. The
//     charge may have happened. Look the key up (LookupCharge, LookupRefund) before charging
//     again, or repeat the call with the same key, which is always safe with the sandbox
//     (a real provider's key window ends: see What providers promise).
//
// IsOutcomeUnknown tells the last case from the others. Which answers of each operation are
// final is one table per operation (answers.go, listed in docs/providers.md): the code that
// calls a provider asks AnswerOf what an answer settles, rather than testing errors one by
// one.
//
// # What providers promise
//
// The sandbox keeps keys for ever, fences by key and finds a charge by its key; real
// providers promise less. Capabilities (capabilities.go, listed in docs/providers.md) is
// each provider's promises as its public docs state them, and MayResend, MustLookUpFirst,
// CanFence, LookUpBy and LookUpComplete are the decisions recovery reads from a row.
package psp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tekrar/tekrar/internal/pgtext"
)

// Provider is a card processor. Every call carries a provider-side idempotency key that
// tekrar derives from its own key row; the provider charges at most once per key.
type Provider interface {
	// Charge charges a card once per req.Key. Repeating a key with the same amount,
	// currency and card returns the first charge, whatever its status.
	Charge(ctx context.Context, req ChargeRequest) (Charge, error)
	// Refund refunds part or all of a succeeded charge once per req.Key.
	Refund(ctx context.Context, req RefundRequest) (Refund, error)
	// LookupCharge returns the charge made with key, or ErrNotFound if there is none.
	LookupCharge(ctx context.Context, key string) (Charge, error)
	// LookupRefund returns the refund made with key, or ErrNotFound if there is none.
	LookupRefund(ctx context.Context, key string) (Refund, error)
	// CancelCharge fences key, as a real processor's payment-intent cancel does: once it
	// returns a charge with StatusCanceled, no charge can ever be made under key, and a
	// charge request still in flight under it is refused (ErrKeyCanceled). If a charge was
	// made under key first, CancelCharge returns that charge instead (succeeded or
	// declined), and cancels nothing. A provider that cannot fence returns
	// ErrCancelUnsupported; the caller must then owe a refund of any charge that still
	// appears under key (see checkout's compensations).
	//
	// "No charge yet" (LookupCharge's ErrNotFound) is not "never will be" while a charge
	// request may still be in flight: only a canceled key is.
	CancelCharge(ctx context.Context, key string) (Charge, error)
	// ListCharges returns up to limit charges created in [since, until), oldest first, after
	// the charge whose id is after ("" for the first page), and the id to pass as after
	// for the next page ("" when this page is the last). A canceled key is listed too, with
	// StatusCanceled. Reconciliation walks a window page by page with it.
	ListCharges(ctx context.Context, q ChargeListQuery) (ChargePage, error)
	// CardFingerprint returns the identity of the card that token stands for, as real
	// processors expose it (Stripe's card.fingerprint): the same for every token of one card,
	// different for different cards. Mobile SDKs make a new single-use token for each
	// attempt, so two attempts of one purchase rarely share a token; they share this. It
	// charges nothing and may be asked for a token that was used already. A token the
	// provider does not know is ErrNotFound; any other error means the provider could not
	// say.
	CardFingerprint(ctx context.Context, token string) (string, error)
}

// CardFingerprintRequest is the body of POST /cards/fingerprint: the token goes in a body,
// never a URL, which proxies and access logs keep.
type CardFingerprintRequest struct {
	CardToken string `json:"card_token"`
}

// CardFingerprintAnswer is its answer.
type CardFingerprintAnswer struct {
	Fingerprint string `json:"fingerprint"`
}

// MaxCardFingerprint is the longest card fingerprint tekrar accepts from a provider.
const MaxCardFingerprint = 255

func checkCardToken(token string) error {
	if token == "" || len(token) > maxTextLen {
		return fmt.Errorf("%w: card_token must be 1 to %d characters", ErrInvalidRequest, maxTextLen)
	}
	return checkText("card_token", token)
}

// ChargeListQuery selects a page of the charges of a window.
type ChargeListQuery struct {
	Since, Until time.Time // created at or after Since, before Until
	After        string    // the id of the last charge of the previous page; "" for the first
	Limit        int       // 1 to MaxListLimit; 0 means MaxListLimit
}

// MaxListLimit is the largest page ListCharges returns.
const MaxListLimit = 1000

// ChargePage is one page of ListCharges.
type ChargePage struct {
	Charges []Charge `json:"charges"`
	// Next is the After of the next page; "" when there is none.
	Next string `json:"next"`
}

func (q *ChargeListQuery) validate() error {
	if q.Limit == 0 {
		q.Limit = MaxListLimit
	}
	if q.Limit < 0 || q.Limit > MaxListLimit {
		return fmt.Errorf("%w: limit must be 1 to %d", ErrInvalidRequest, MaxListLimit)
	}
	if q.Since.IsZero() || q.Until.IsZero() || !q.Since.Before(q.Until) {
		return fmt.Errorf("%w: since must be before until", ErrInvalidRequest)
	}
	if len(q.After) > maxKeyLen {
		return fmt.Errorf("%w: after must be a charge id", ErrInvalidRequest)
	}
	return checkText("after", q.After)
}

// ChargeRequest asks for one charge.
type ChargeRequest struct {
	// Key is the provider-side idempotency key: 1 to 255 printable ASCII characters
	// without spaces, and not "." or "..".
	Key string `json:"key"`
	// Amount is in the currency's minor unit (cents); it must be positive.
	Amount int64 `json:"amount"`
	// Currency is an ISO 4217 code in upper case ("EUR").
	Currency string `json:"currency"`
	// CardToken is the token of the card. It is never stored nor returned. A charge names
	// either a token or a saved card (Customer and PaymentMethod), not both.
	CardToken string `json:"card_token,omitempty"`
	// Customer and PaymentMethod name a card the customer saved at the provider (see
	// Sandbox.SavePaymentMethod): what later charges of an installment plan are made on.
	Customer      string `json:"customer,omitempty"`
	PaymentMethod string `json:"payment_method,omitempty"`
	// Description is free text kept on the charge; it is not compared on a repeated key.
	Description string `json:"description,omitempty"`
}

// Charge statuses. All are final.
const (
	StatusSucceeded = "succeeded"
	StatusDeclined  = "declined"
	// StatusCanceled is a key that was canceled before any charge was made under it: it
	// holds no amount and no card, and nothing can be charged under it any more.
	StatusCanceled = "canceled"
)

// Decline codes of the sandbox.
const (
	DeclineCardDeclined = "card_declined" // tok_declined
	DeclineInvalidCard  = "invalid_card"  // a token the sandbox does not know
)

// Charge is a charge as the provider recorded it.
type Charge struct {
	ID          string `json:"id"` // "ch_" and random characters
	Key         string `json:"key"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`       // StatusSucceeded, StatusDeclined or StatusCanceled
	DeclineCode string `json:"decline_code"` // set when declined
	CardBrand   string `json:"card_brand"`   // "visa"; empty for an unknown card
	CardLast4   string `json:"card_last4"`   // "4242"; empty for an unknown card
	// CardFingerprint is the identity of the charged card, as CardFingerprint would answer
	// for the request's token (Stripe's payment_method_details.card.fingerprint): what an
	// order's key keeps of its card, so that a first arrival needs no separate look-up.
	// Empty when the provider does not say (an unknown card, a canceled key, a look-up
	// that does not carry it).
	CardFingerprint string `json:"card_fingerprint,omitempty"`
	// Description is the request's; tekrar names the order a charge is for in it.
	Description string `json:"description,omitempty"`
	// Refunded is how much of Amount the provider has refunded so far, by any refund key:
	// tekrar's own refunds and those made outside it (an operator at the provider's
	// dashboard). A caller that owes "the rest of the charge" refunds Amount - Refunded.
	Refunded int64     `json:"refunded"`
	Created  time.Time `json:"created"`
	// Dispute is the charge's latest dispute, nil when it has none: what a processor's
	// charge object says of disputes (Stripe's charge.disputed). A dispute still open means
	// the cardholder's bank may yet give them the amount back; refunding the charge then can
	// pay them twice.
	Dispute *Dispute `json:"dispute,omitempty"`
}

// DisputeOpen reports whether the charge's latest dispute is still open.
func (c Charge) DisputeOpen() bool { return c.Dispute != nil && c.Dispute.Status == DisputeOpen }

// RefundRequest asks for one refund of a succeeded charge.
type RefundRequest struct {
	// Key is the provider-side idempotency key, with the same rules as ChargeRequest.Key.
	// Refund keys and charge keys are separate namespaces.
	Key      string `json:"key"`
	ChargeID string `json:"charge_id"`
	// Amount is in minor units and must be positive; the refunds of a charge never add up
	// to more than its amount.
	Amount int64  `json:"amount"`
	Reason string `json:"reason,omitempty"`
}

// RefundSucceeded is the status of every refund: a refund is either made or refused.
const RefundSucceeded = "succeeded"

// Refund is a refund as the provider recorded it.
type Refund struct {
	ID       string    `json:"id"` // "re_" and random characters
	Key      string    `json:"key"`
	ChargeID string    `json:"charge_id"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"` // the charge's
	Status   string    `json:"status"`   // RefundSucceeded
	Created  time.Time `json:"created"`
}

// The definitive errors: the provider answered, and nothing was charged or refunded.
var (
	// ErrNotFound: no charge (or refund) has that key, or a refund names an unknown charge.
	ErrNotFound = errors.New("psp: not found")
	// ErrKeyReused: the same provider key was sent with different parameters (amount,
	// currency, token/charge) — a bug in the caller, never retried.
	ErrKeyReused = errors.New("psp: idempotency key reused with different parameters")
	// ErrRefundExceedsCharge: refunds would exceed the charged amount (the provider enforces
	// it too).
	ErrRefundExceedsCharge = errors.New("psp: refunds would exceed the charged amount")
	// ErrNotRefundable: the charge exists but was declined, so there is nothing to refund.
	ErrNotRefundable = errors.New("psp: charge is not refundable")
	// ErrInvalidRequest: the request is malformed (empty key, non-positive amount, bad
	// currency...) — a bug in the caller, never retried.
	ErrInvalidRequest = errors.New("psp: invalid request")
	// ErrKeyCanceled: the charge key was canceled (CancelCharge) before this charge could
	// be made; nothing was charged, and nothing ever will be under this key.
	ErrKeyCanceled = errors.New("psp: charge key was canceled")
	// ErrCancelUnsupported: this provider cannot fence a charge key. Nothing happened.
	ErrCancelUnsupported = errors.New("psp: the provider cannot cancel a charge key")
	// ErrLookupUnsupported: this provider cannot find a charge that way (by key at a
	// provider without keys, by reference at one that finds charges by key). It says
	// nothing of whether a charge was made.
	ErrLookupUnsupported = errors.New("psp: the provider cannot look a charge up this way")
)

// IsOutcomeUnknown reports whether err leaves the outcome of a Charge or Refund unknown: it
// is not nil and not one of the definitive errors. Transport failures, provider 5xx and
// context cancellation or deadlines are all unknown: the charge may have happened.
func IsOutcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	for _, d := range []error{ErrNotFound, ErrKeyReused, ErrRefundExceedsCharge, ErrNotRefundable, ErrInvalidRequest,
		ErrKeyCanceled, ErrCancelUnsupported, ErrLookupUnsupported} {
		if errors.Is(err, d) {
			return false
		}
	}
	return true
}

// The sandbox's magic card tokens. Each names a test card of its own, and a token that
// starts with one and an underscore ("tok_visa_7f3a", "tok_slow_2") is another single-use
// token of that same card, with the same behaviour and the same CardFingerprint: what a
// mobile SDK makes for each attempt.
const (
	TokenVisa       = "tok_visa"       // approves: visa 4242
	TokenMastercard = "tok_mastercard" // approves: mastercard 4444
	TokenDeclined   = "tok_declined"   // declines with card_declined (a recorded charge)
	TokenFail       = "tok_fail"       // fails like a provider 5xx; nothing is recorded
	TokenTimeout    = "tok_timeout"    // charges, then never answers: the call ends with its ctx
	TokenSlow       = "tok_slow"       // waits SandboxOptions.SlowDelay, then approves like tok_visa
	// TokenLate is a processor slower than its caller: it takes SandboxOptions.SlowDelay to
	// approve like tok_visa, and once it has the request it finishes it whatever the caller
	// does meanwhile (gives up, freezes, dies). The charge is then made late, unless its key
	// was canceled first.
	TokenLate = "tok_late"
)

const (
	maxKeyLen  = 255
	maxTextLen = 500
)

func checkKey(key string) error {
	if key == "" || len(key) > maxKeyLen {
		return fmt.Errorf("%w: key must be 1 to %d characters", ErrInvalidRequest, maxKeyLen)
	}
	if key == "." || key == ".." {
		return fmt.Errorf("%w: key must not be %q", ErrInvalidRequest, key)
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return fmt.Errorf("%w: key must be printable ASCII without spaces", ErrInvalidRequest)
		}
	}
	return nil
}

func checkCurrency(c string) error {
	if len(c) != 3 {
		return fmt.Errorf("%w: currency must be an upper-case ISO 4217 code such as EUR", ErrInvalidRequest)
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return fmt.Errorf("%w: currency must be an upper-case ISO 4217 code such as EUR", ErrInvalidRequest)
		}
	}
	return nil
}

func (r ChargeRequest) validate() error {
	if err := checkKey(r.Key); err != nil {
		return err
	}
	if r.Amount <= 0 {
		return fmt.Errorf("%w: amount must be positive", ErrInvalidRequest)
	}
	if err := checkCurrency(r.Currency); err != nil {
		return err
	}
	switch {
	case r.PaymentMethod != "":
		if r.CardToken != "" {
			return fmt.Errorf("%w: send card_token or payment_method, not both", ErrInvalidRequest)
		}
		if r.Customer == "" || len(r.Customer) > maxKeyLen || len(r.PaymentMethod) > maxKeyLen {
			return fmt.Errorf("%w: payment_method needs its customer (each 1 to %d characters)", ErrInvalidRequest, maxKeyLen)
		}
		if err := checkText("customer", r.Customer, "payment_method", r.PaymentMethod); err != nil {
			return err
		}
	case r.CardToken == "" || len(r.CardToken) > maxTextLen:
		return fmt.Errorf("%w: card_token must be 1 to %d characters", ErrInvalidRequest, maxTextLen)
	}
	if len(r.Description) > maxTextLen {
		return fmt.Errorf("%w: description must be at most %d characters", ErrInvalidRequest, maxTextLen)
	}
	return checkText("card_token", r.CardToken, "description", r.Description)
}

// checkText refuses text the ledger (Postgres text) cannot hold: a NUL character or bytes
// that are not UTF-8. Its arguments are name, value pairs.
func checkText(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !pgtext.Valid(pairs[i+1]) {
			return fmt.Errorf("%w: %s must be UTF-8 without NUL characters", ErrInvalidRequest, pairs[i])
		}
	}
	return nil
}

func (r RefundRequest) validate() error {
	if err := checkKey(r.Key); err != nil {
		return err
	}
	if r.ChargeID == "" || len(r.ChargeID) > maxKeyLen {
		return fmt.Errorf("%w: charge_id must be 1 to %d characters", ErrInvalidRequest, maxKeyLen)
	}
	if r.Amount <= 0 {
		return fmt.Errorf("%w: amount must be positive", ErrInvalidRequest)
	}
	if len(r.Reason) > maxTextLen {
		return fmt.Errorf("%w: reason must be at most %d characters", ErrInvalidRequest, maxTextLen)
	}
	return checkText("charge_id", r.ChargeID, "reason", r.Reason)
}
