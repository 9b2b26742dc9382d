// Package completer finishes abandoned keys: every serve process runs it (internal/app,
// Completer.Run), every Config.Interval (docs/recovery.md).
//
// A key is abandoned when its request is in progress and its lease has lapsed: the worker
// died, or gave the key back after an unknown provider outcome, and the client has not
// retried within Config.Grace. A pass takes such keys over, oldest first, and drives each
// to an outcome from what the provider recorded, never by charging (card tokens are not
// stored):
//
//   - an order's charge the provider has: the order is settled from it, paid or declined,
//     as its first worker would have;
//   - no charge yet: the key is fenced at the provider first (a request may still be in
//     flight), then the order is canceled, with a refund owed if the provider cannot fence;
//   - a refund: finished as a retry would, made now if the provider has none;
//   - the provider cannot tell: the lease is given back for the next pass, or, once the key
//     is Config.AttentionAfter old, it is handed to an operator (needs_attention), never
//     expired silently.
//
// It then drives the compensations that are due (checkout.Service.CompensateDue): refunds
// owed for charges that appeared under keys tekrar gave up on.
//
// # What it owns
//
// Nothing of its own: it reads idempotency_keys (the work list, through the partial index
// of unfinished keys) and gives a lease back through the engine (checkout/internal/keyed),
// which owns the key's statements, and writes the rest through checkout's entries
// (checkout/roles.go): idempotency_keys (takeover, completion, needs_attention), orders,
// payments, refunds, compensations, and the events of the changes in outbox_events.
//
// # Its lock
//
// None of its own: the lease takeover decides who works on a key. A pass that takes a key
// over fences out its former worker and any other process's completer (their writes name
// the old lease token and match nothing), so every serve process can run one, and a
// process killed in a pass leaves keys whose new lease lapses for the next pass.
package completer
