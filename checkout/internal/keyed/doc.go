// Package keyed is tekrar's idempotency engine: what makes a keyed request (an order, a
// refund, a register's sale) happen once however often it arrives. It is internal to
// checkout, which runs every keyed door on it, and it knows no route: an Operation names
// what its fingerprint covers (Spec). It writes idempotency_keys (a key: fingerprint,
// scope, state, lease, stored answer) and key_events (a key's history, in batches:
// History), and reads key_tombstones (what the sweeper left of a key).
//
// Its promises: one fingerprint per request (Fingerprint); a repeat costs one indexed
// SELECT (Engine.Replay); one decision table for every door (Execute, and ExecuteMany for
// a batch's existing keys), each answer recorded once; every write of a key is fenced by
// its lease token (SetStateSQL), so a worker that lost its lease writes nothing; a swept
// key stays refused while its tombstone lives (TombstoneSQL); history never slows a request.
// With a Cache, a repeat of a completed key the process replayed before costs no database
// read at all, and every change of a completed key made outside the request path reaches
// every process's cache by a notification sent in its own transaction (CacheChannel).
package keyed
