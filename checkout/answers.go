package checkout

import (
	"errors"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// Which provider answers are final.
//
// Every call to the provider ends in one answer: a result, or one of the psp package's
// definitive errors, or any other error (the outcome is unknown). What tekrar makes of an
// answer is decided here, in one table per provider operation, and nowhere else: the code
// that calls the provider asks answerOf and acts on the verdict, rather than testing errors
// one by one. docs/providers.md lists the same table for operators and client authors, and
// TestProviderAnswerTables keeps the two from drifting apart.
//
// A verdict says what the answer settles:
//
//   - verdictDone: the provider did it (or, for a look-up, has the record): settle from it;
//   - verdictRefused: the provider answered and nothing happened, and nothing will under
//     this key with these parameters. A client's key is completed with the row's problem as
//     its stored answer, so that a retry replays it instead of waiting for ever;
//   - verdictLookUp: a refusal that means the provider did it already by another way (a
//     refund made at its dashboard; the charge of an earlier attempt under the same key):
//     tekrar reads the provider's record first, records what it finds, and then answers
//     finally;
//   - verdictNone: the look-up found nothing under the key yet; the caller may make the
//     call under the same key (never "never": a request may still be in flight);
//   - verdictAttention: the provider refuses what tekrar derived (a reused or malformed
//     request): a bug no retry fixes, for an operator;
//   - verdictUnknown: the outcome is unknown (transport failure, provider 5xx, timeout, an
//     answer this operation does not give): the same key is retried, looked up first.
type verdict string

const (
	verdictDone      verdict = "done"
	verdictRefused   verdict = "refused"
	verdictLookUp    verdict = "look_up"
	verdictNone      verdict = "none_yet"
	verdictAttention verdict = "attention"
	verdictUnknown   verdict = "unknown"
)

// Provider operations, as the tables name them.
const (
	opCharge          = "charge"
	opRefund          = "refund"
	opLookupCharge    = "lookup_charge"
	opLookupRefund    = "lookup_refund"
	opCancelCharge    = "cancel_charge"
	opListCharges     = "list_charges"
	opCardFingerprint = "card_fingerprint"
)

// providerAnswer is one row of a table: the provider's answer (err nil is a result) and what it
// settles.
type providerAnswer struct {
	Err     error // nil: the call returned a result; errUnknownAnswer: any error not listed
	Verdict verdict
	// Problem is what the client of a key is answered, stored on the key when the verdict
	// is final (refused, look-up); "" when the row answers no client directly.
	Problem problem.Code
	// Key is what becomes of the client's key.
	Key string
}

// errUnknownAnswer stands in a table for every error the table does not list.
var errUnknownAnswer = errors.New("any other error")

// providerAnswers is the table, operation by operation, in the order docs/providers.md
// lists it.
var providerAnswers = map[string][]providerAnswer{
	opCharge: {
		{nil, verdictDone, "", "completed: 201 with the paid order; a declined charge is 402 payment_declined, stored"},
		{psp.ErrKeyCanceled, verdictRefused, problem.CodePaymentAbandoned, "completed: the order is canceled (the key was fenced while this worker was away), 409 stored"},
		{psp.ErrKeyReused, verdictLookUp, "", "a retry with a new token of the key's card: the charge under the key is the order's if it is for the order's amount; otherwise for an operator"},
		{psp.ErrInvalidRequest, verdictAttention, problem.CodeNeedsAttention, "needs_attention: tekrar sent what it validated, so a refusal is a bug"},
		{errUnknownAnswer, verdictUnknown, problem.CodePaymentPending, "released: 503 payment_pending; the retry (or the completer) looks the charge up first"},
	},
	opRefund: {
		{nil, verdictDone, "", "completed: 201 with the refund"},
		{psp.ErrRefundExceedsCharge, verdictLookUp, problem.CodeRefundedAtProvider, "completed: the charge is looked up, the refunds made at the provider are recorded on the order, the refund failed, 409 stored"},
		{psp.ErrNotRefundable, verdictRefused, problem.CodeRefundRefused, "completed: the refund failed, its amount freed on the order, 422 stored"},
		{psp.ErrNotFound, verdictRefused, problem.CodeRefundRefused, "completed: the refund failed (the provider has no such charge), 422 stored"},
		{psp.ErrInvalidRequest, verdictRefused, problem.CodeRefundRefused, "completed: the refund failed, 422 stored"},
		{psp.ErrKeyReused, verdictAttention, problem.CodeNeedsAttention, "needs_attention: the derived key holds another refund at the provider"},
		{errUnknownAnswer, verdictUnknown, problem.CodePaymentPending, "released: 503 payment_pending; the retry (or the completer) looks the refund up first"},
	},
	opLookupCharge: {
		{nil, verdictDone, "", "settled from the charge found (paid, declined, or canceled if the key was fenced)"},
		{psp.ErrNotFound, verdictNone, "", "a retry charges under the same key; the completer fences the key (cancel) before it gives up"},
		{psp.ErrInvalidRequest, verdictAttention, problem.CodeNeedsAttention, "for an operator"},
		{errUnknownAnswer, verdictUnknown, problem.CodePaymentPending, "released; asked again"},
	},
	opLookupRefund: {
		{nil, verdictDone, "", "completed from the refund found"},
		{psp.ErrNotFound, verdictNone, "", "the refund is asked for under the same key"},
		{psp.ErrInvalidRequest, verdictAttention, problem.CodeNeedsAttention, "for an operator"},
		{errUnknownAnswer, verdictUnknown, problem.CodePaymentPending, "released; asked again"},
	},
	opCancelCharge: {
		{nil, verdictDone, "", "settled from the answer: canceled (409 payment_abandoned, nothing charged) or the charge made first"},
		{psp.ErrCancelUnsupported, verdictRefused, problem.CodePaymentAbandoned, "completed: the order is canceled with a compensation owed, 409 stored"},
		{errUnknownAnswer, verdictUnknown, "", "left in progress; the completer asks again"},
	},
	opListCharges: {
		{nil, verdictDone, "", "no key: the reconciliation walks the page"},
		{psp.ErrNotFound, verdictRefused, "", "no key: the run fails (the cursor is unknown); the next run starts again"},
		{errUnknownAnswer, verdictUnknown, "", "no key: the run fails; the next run starts again"},
	},
	opCardFingerprint: {
		{nil, verdictDone, "", "claimed with the card's identity"},
		{psp.ErrNotFound, verdictRefused, "", "claimed without one: the token matches only itself, and its charge is declined"},
		{psp.ErrInvalidRequest, verdictRefused, "", "claimed without one, as not found"},
		{errUnknownAnswer, verdictUnknown, problem.CodeCardIdentityUnavailable, "nothing claimed: 503 card_identity_unavailable"},
	},
}

// answerOf is the row of op's table that err is: the first whose error err is, or the
// table's last row (any other error: unknown).
func answerOf(op string, err error) providerAnswer {
	rows, ok := providerAnswers[op]
	if !ok {
		panic("checkout: no answer table for provider operation " + op)
	}
	for _, a := range rows {
		switch {
		case a.Err == nil && err == nil:
			return a
		case a.Err != nil && a.Err != errUnknownAnswer && errors.Is(err, a.Err):
			return a
		}
	}
	return rows[len(rows)-1]
}

// NoChargeYet reports whether err, the answer of a charge look-up, says the provider has no
// charge under the key yet (the lookup_charge table's none_yet row), for a caller outside
// the package that looks a charge up (reconciliation).
func NoChargeYet(err error) bool { return answerOf(opLookupCharge, err).Verdict == verdictNone }

// ChargeOutcomeUnknown reports whether err, the answer of a charge, leaves its outcome
// unknown (the charge table's unknown row): the same key is looked up before it is charged
// again. For a caller outside the package that charges (the installment runs).
func ChargeOutcomeUnknown(err error) bool { return answerOf(opCharge, err).Verdict == verdictUnknown }
