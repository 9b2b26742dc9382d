// Package operator is what an operator may do to a key or an order: the few actions of the
// console (admin) that change something (refund an order, release a key that needs
// attention, force a key to expire). Each is idempotent, and each that changes something
// hands its record to a Recorder inside the transaction of its effect, so that an action
// and its audit entry commit together or not at all. The console owns the audit log; this
// package only describes what it did.
//
// # What it owns
//
// No table and no statement: it decides, and writes through the engine
// (checkout/internal/keyed: a key's lock, expiry and release from attention) and
// checkout's entries (checkout/roles.go), which own the statements. A refund goes through the very path of
// POST /v1/orders/{id}/refunds (checkout.Service.CreateRefund), keyed by the form's nonce;
// a release settles the key's order or refund from what the provider recorded, as the
// completer would (checkout.Service.ResolveCharge, ResolveRefund), and never charges; an
// expiry moves the key's expires_at (idempotency_keys). It reads idempotency_keys,
// key_tombstones, orders, refunds and clients.
//
// # Why a provider call holds no lock
//
// A release asks the provider outside any transaction (a network call never holds row
// locks), then writes what it said in one transaction fenced by the key's lease token: two
// operators releasing at once settle it once, and a retry of the request meanwhile is
// answered needs_attention or the stored result, never run a second time.
package operator
