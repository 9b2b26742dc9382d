// Package keyed is becoming tekrar's idempotency engine: what makes a keyed request (an
// order, a refund, a register's sale) happen once however often it arrives. It is internal
// to checkout, which runs its keyed doors on it, and it knows no route: a door names what
// its fingerprint covers.
//
// Its tables are idempotency_keys (a key: its fingerprint, state, lease and stored answer),
// key_tombstones (what the sweeper leaves of a swept key) and key_events (a key's history).
// It holds so far the parts of the engine that every door shares as they are; the decision
// table (checkout's decide), the claim and the lease still live in checkout.
//
// Its promises:
//   - one fingerprint per request (Fingerprint): the method, the path and the canonical
//     body (CanonicalJSON), so that key order and whitespace never make two requests of
//     one; stored fingerprints depend on its bytes, byte for byte;
//   - a stored answer's headers read back as they were written (DecodeHeaders), on the
//     replay's hot path without encoding/json;
//   - a key's completion is fenced (CompletionSQL): only the worker holding the key's lease
//     token writes it, so a worker that lost its lease writes nothing;
//   - a swept key stays refused while its tombstone lives (TombstoneSQL): it is read as a
//     completed key that no claim can take again;
//   - a key's history (History) never slows a request: entries are written in batches off
//     the request path, and dropped and counted, not waited for, when the database is down.
package keyed
