// Package sdk is tekrar's Go SDK for a merchant's service: the /v1 orders, refunds,
// products and carts, with the retry policy every caller of a payment API needs written
// once, so that no caller writes its own and charges a card twice.
//
// The policy:
//
//   - One Idempotency-Key per intent (one purchase, one refund), made with NewKey when the
//     customer decides, kept with the pending intent, and sent on every attempt of it with
//     the same body: a retry can never become a second charge.
//   - A lost answer (a connection that drops, an attempt that times out, a proxy's 502) is
//     retried with the same key and body: tekrar replays what the first attempt did, or
//     finishes it.
//   - A problem is retried only when it says "retryable": true, never because of its status
//     alone. The key is never changed by the SDK: when a problem says "safe_new_key": true
//     the caller may start a new intent (Error.SafeNewKey), and only then.
//   - Waits grow exponentially with jitter, never shorter than the answer's Retry-After, and
//     keyed requests send Prefer: wait, so that a retry that meets its first attempt still
//     running waits for its answer instead of being told to come back.
//   - Attempts are bounded (Policy.MaxAttempts), and the context bounds everything: a
//     canceled context stops the retries at once.
//
// Answers say whether they were replays and until when their key is honoured
// (Keyed.Replayed, Keyed.Expires: Idempotent-Replayed and Idempotency-Expires). Problems are
// *Error values that errors.Is matches against the sentinel of their code
// (ErrIdempotencyKeyReused, ErrPaymentDeclined, ...); docs/problems.md lists the codes.
package sdk
