// Package sweeper expires idempotency keys: the scheduled task "sweep" (internal/app) and
// `tekrar sweep` run its passes (docs/sweeping.md).
//
// # What it owns
//
// A pass writes four tables and nothing else, with the statements in sweeper_sql.go:
//
//   - key_tombstones: it inserts a tombstone for each completed key past expires_at
//     (replacing an older one of the same client and key), sets key_id to NULL once the
//     key row is gone, and deletes tombstones whose forget_at has passed;
//   - idempotency_keys: it deletes the rows of completed keys whose tombstone has settled,
//     and tells every process's replay cache to forget them in the same statement
//     (keyed.NotifyGoneSQL, the one thing it takes from the engine);
//   - key_events: it inserts an expired event for each deleted key, and deletes events
//     older than Config.EventRetention;
//   - sweeps: it inserts one row per pass, what the pass did, for the console.
//
// It reads clients.tombstone_grace (how long a tombstone lives) and orders and refunds
// (the public ids an expired event names). Keys in progress or needing attention are never
// touched: they are work not yet done, and expiring them would let a retry start a payment
// a second time. The package knows nothing of checkout's Go types: the rule it shares with
// checkout (a completed key is expired from its expires_at on, checkout.KeyExpired) is
// written in its SQL, and checkout's tests hold both to the same boundary
// (TestKeyExpiryBoundary). checkout imports nothing of it; the app wires it.
//
// # Its lock
//
// A pass takes no lock of its own. Two passes at once would do no row twice (every
// statement skips what is already done), but each would count and record the same keys.
// One pass at a time is the scheduled task's lock (internal/schedule: a session lock, so a
// process that dies lets go of it), which serve's ticks and `tekrar sweep` both go through.
//
// # Why batches and pauses
//
// A backlog can be a million keys. One statement over all of them would hold its row locks,
// and the claims of checkout traffic waiting on them, for as long as it ran, and would
// make one transaction of the whole pass. So each step runs in batches of Config.Batch
// rows, each batch one statement in its own short transaction, and rests between batches
// (Config.Pause, or as long as the batch took), so that on a busy database, where batches
// run slower, the sweeper backs off by as much without any tuning. Tombstones are written
// by walking the (expires_at, id) index with a cursor, so the backlog costs one pass over
// the index rather than one per batch.
package sweeper
