package psp

import (
	"errors"
	"maps"
	"slices"

	"github.com/tekrar/tekrar/internal/problem"
)

// Which provider answers are final.
//
// Every call to the provider ends in one answer: a result, or one of this package's
// definitive errors, or any other error (the outcome is unknown). What tekrar makes of an
// answer is decided here, in one table per provider operation, and nowhere else: the code
// that calls the provider asks AnswerOf and acts on the Verdict, rather than testing errors
// one by one. docs/providers.md lists the same table for operators and client authors, and
// TestProviderAnswerTables keeps the two from drifting apart.
//
// A Verdict says what the answer settles:
//
//   - VerdictDone: the provider did it (or, for a look-up, has the record): settle from it;
//   - VerdictRefused: the provider answered and nothing happened, and nothing will under
//     this key with these parameters. A client's key is completed with the row's problem as
//     its stored answer, so that a retry replays it instead of waiting for ever;
//   - VerdictLookUp: a refusal that means the provider did it already by another way (a
//     refund made at its dashboard; the charge of an earlier attempt under the same key):
//     tekrar reads the provider's record first, records what it finds, and then answers
//     finally;
//   - VerdictNone: the look-up found nothing under the key yet; the caller may make the
//     call under the same key (never "never": a request may still be in flight);
//   - VerdictAttention: the provider refuses what tekrar derived (a reused or malformed
//     request): a bug no retry fixes, for an operator;
//   - VerdictUnknown: the outcome is unknown (transport failure, provider 5xx, timeout, an
//     answer this operation does not give): the same key is retried, looked up first.
type Verdict string

const (
	VerdictDone      Verdict = "done"
	VerdictRefused   Verdict = "refused"
	VerdictLookUp    Verdict = "look_up"
	VerdictNone      Verdict = "none_yet"
	VerdictAttention Verdict = "attention"
	VerdictUnknown   Verdict = "unknown"
)

// Provider operations, as the tables name them.
const (
	OpCharge          = "charge"
	OpRefund          = "refund"
	OpLookupCharge    = "lookup_charge"
	OpLookupRefund    = "lookup_refund"
	OpCancelCharge    = "cancel_charge"
	OpListCharges     = "list_charges"
	OpCardFingerprint = "card_fingerprint"
)

// Answer is one row of a table: the provider's answer (err nil is a result) and what it
// settles.
type Answer struct {
	Err     error // nil: the call returned a result; errUnknownAnswer: any error not listed
	Verdict Verdict
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
var providerAnswers = map[string][]Answer{
	OpCharge: {
		{nil, VerdictDone, "", "completed: 201 with the paid order; a declined charge is 402 payment_declined, stored"},
		{ErrKeyCanceled, VerdictRefused, problem.CodePaymentAbandoned, "completed: the order is canceled (the key was fenced while this worker was away), 409 stored"},
		{ErrKeyReused, VerdictLookUp, "", "a retry with a new token of the key's card: the charge under the key is the order's if it is for the order's amount; otherwise for an operator"},
		{ErrInvalidRequest, VerdictAttention, problem.CodeNeedsAttention, "needs_attention: tekrar sent what it validated, so a refusal is a bug"},
		{errUnknownAnswer, VerdictUnknown, problem.CodePaymentPending, "released: 503 payment_pending; the retry (or the completer) looks the charge up first"},
	},
	OpRefund: {
		{nil, VerdictDone, "", "completed: 201 with the refund"},
		{ErrRefundExceedsCharge, VerdictLookUp, problem.CodeRefundedAtProvider, "completed: the charge is looked up, the refunds made at the provider are recorded on the order, the refund failed, 409 stored"},
		{ErrNotRefundable, VerdictRefused, problem.CodeRefundRefused, "completed: the refund failed, its amount freed on the order, 422 stored"},
		{ErrNotFound, VerdictRefused, problem.CodeRefundRefused, "completed: the refund failed (the provider has no such charge), 422 stored"},
		{ErrInvalidRequest, VerdictRefused, problem.CodeRefundRefused, "completed: the refund failed, 422 stored"},
		{ErrKeyReused, VerdictAttention, problem.CodeNeedsAttention, "needs_attention: the derived key holds another refund at the provider"},
		{errUnknownAnswer, VerdictUnknown, problem.CodePaymentPending, "released: 503 payment_pending; the retry (or the completer) looks the refund up first"},
	},
	OpLookupCharge: {
		{nil, VerdictDone, "", "settled from the charge found (paid, declined, or canceled if the key was fenced)"},
		{ErrNotFound, VerdictNone, "", "a retry charges under the same key; the completer fences the key (cancel) before it gives up"},
		{ErrInvalidRequest, VerdictAttention, problem.CodeNeedsAttention, "for an operator"},
		{errUnknownAnswer, VerdictUnknown, problem.CodePaymentPending, "released; asked again"},
	},
	OpLookupRefund: {
		{nil, VerdictDone, "", "completed from the refund found"},
		{ErrNotFound, VerdictNone, "", "the refund is asked for under the same key"},
		{ErrInvalidRequest, VerdictAttention, problem.CodeNeedsAttention, "for an operator"},
		{errUnknownAnswer, VerdictUnknown, problem.CodePaymentPending, "released; asked again"},
	},
	OpCancelCharge: {
		{nil, VerdictDone, "", "settled from the answer: canceled (409 payment_abandoned, nothing charged) or the charge made first"},
		{ErrCancelUnsupported, VerdictRefused, problem.CodePaymentAbandoned, "completed: the order is canceled with a compensation owed, 409 stored"},
		{errUnknownAnswer, VerdictUnknown, "", "left in progress; the completer asks again"},
	},
	OpListCharges: {
		{nil, VerdictDone, "", "no key: the reconciliation walks the page"},
		{ErrNotFound, VerdictRefused, "", "no key: the run fails (the cursor is unknown); the next run starts again"},
		{errUnknownAnswer, VerdictUnknown, "", "no key: the run fails; the next run starts again"},
	},
	OpCardFingerprint: {
		{nil, VerdictDone, "", "a re-tokenized retry is compared by its card (a first arrival's comes from its charge)"},
		{ErrNotFound, VerdictRefused, "", "the token has no card: the retry is a reused key (422)"},
		{ErrInvalidRequest, VerdictRefused, "", "as not found"},
		{errUnknownAnswer, VerdictUnknown, problem.CodeCardIdentityUnavailable, "nothing executed: 503 card_identity_unavailable"},
	},
}

// AnswerOf is the row of op's table that err is: the first whose error err is, or the
// table's last row (any other error: unknown).
func AnswerOf(op string, err error) Answer {
	rows, ok := providerAnswers[op]
	if !ok {
		panic("psp: no answer table for provider operation " + op)
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
// charge under the key yet (the lookup_charge table's none_yet row), for a caller that only
// needs that row (reconciliation, the installment runs).
func NoChargeYet(err error) bool { return AnswerOf(OpLookupCharge, err).Verdict == VerdictNone }

// ChargeOutcomeUnknown reports whether err, the answer of a charge, leaves its outcome
// unknown (the charge table's unknown row): the same key is looked up before it is charged
// again. For a caller that only needs that row (the installment runs).
func ChargeOutcomeUnknown(err error) bool { return AnswerOf(OpCharge, err).Verdict == VerdictUnknown }

// AnswerTable is op's table, row by row (nil for an operation no table names), for the tests
// that drive a caller through every row of it.
func AnswerTable(op string) []Answer { return slices.Clone(providerAnswers[op]) }

// AnswerOps is every operation the tables name, sorted, so that a test provider that forces
// answers can show it forces each of them.
func AnswerOps() []string { return slices.Sorted(maps.Keys(providerAnswers)) }
