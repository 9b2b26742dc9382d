package sweeper

import "github.com/tekrar/tekrar/checkout/internal/keyed"

// The sweeper's statements: each batch is one of them, in its own short transaction (see
// the package doc for the tables they write).

// recordSweepSQL records one pass in sweeps, for operators: its start ($1) and end ($2),
// the process that ran it ($3), how many rows each step touched ($4-$7), its batches ($8)
// and its error ($9, NULL when it had none).
const recordSweepSQL = `
	INSERT INTO sweeps (started_at, finished_at, node, keys_tombstoned, keys_deleted,
	                    tombstones_forgotten, events_deleted, batches, error)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// tombstoneBatchSQL writes tombstones for up to $2 completed keys expired at $1
// (checkout.KeyExpired's rule: expires_at <= $1), after the cursor ($3, $4), in the order of
// the (expires_at, id) index. It answers how many it wrote and the cursor for the next batch
// (null when it found none). A key whose tombstone is already written waits for the delete
// step and is skipped. An older tombstone of the same client and key (a key forgotten after
// its grace and used again) is replaced.
const tombstoneBatchSQL = `
	WITH batch AS (
	    SELECT k.id, k.client_id, k.key, k.fingerprint, k.method, k.path, k.order_id, k.refund_id,
	           k.created_at, k.expires_at, k.scope_fingerprint, k.card_fingerprint
	      FROM idempotency_keys k
	     WHERE k.expires_at <= $1 AND (k.expires_at, k.id) > ($3, $4) AND k.state = 'completed'
	       AND NOT EXISTS (SELECT 1 FROM key_tombstones t WHERE t.key_id = k.id)
	     ORDER BY k.expires_at, k.id
	     LIMIT $2
	), ins AS (
	    INSERT INTO key_tombstones (client_id, key, key_id, fingerprint, method, path, order_id,
	                                refund_id, first_seen, expired_at, forget_at, created_at,
	                                scope_fingerprint, card_fingerprint)
	    SELECT b.client_id, b.key, b.id, b.fingerprint, b.method, b.path, b.order_id, b.refund_id,
	           b.created_at, b.expires_at, b.expires_at + c.tombstone_grace, $1,
	           b.scope_fingerprint, b.card_fingerprint
	      FROM batch b JOIN clients c ON c.id = b.client_id
	    ON CONFLICT (client_id, key) DO UPDATE
	       SET key_id = excluded.key_id, fingerprint = excluded.fingerprint, method = excluded.method,
	           path = excluded.path, order_id = excluded.order_id, refund_id = excluded.refund_id,
	           first_seen = excluded.first_seen, expired_at = excluded.expired_at,
	           forget_at = excluded.forget_at, created_at = excluded.created_at,
	           scope_fingerprint = excluded.scope_fingerprint, card_fingerprint = excluded.card_fingerprint
	    RETURNING 1
	), last AS (
	    SELECT expires_at, id FROM batch ORDER BY expires_at DESC, id DESC LIMIT 1
	)
	SELECT (SELECT count(*) FROM ins) AS n, (SELECT expires_at FROM last) AS at, (SELECT id FROM last) AS id`

// deleteBatchSQL deletes up to $3 key rows whose tombstones were written before $2, and
// records an expired event for each. The tombstone lets go of the row id either way (the
// row may have gone by another path). Every process's replay cache is told to forget the
// deleted keys (keyed.NotifyGoneSQL): they are expired already, which a cache checks on
// its own clock, but a clock behind the sweeper's must not serve a deleted key.
//
// The batch is passed on as one array of ids, not joined as a relation: "id = ANY(array)"
// is always a probe of the primary key and of the key_id index, whatever the statistics
// say. As a join, the planner estimated its way into a hash join over a sequential scan of
// every tombstone (settled ones included) for each batch once key_tombstones held some
// tens of thousands of rows.
const deleteBatchSQL = `
	WITH batch AS (
	    SELECT array_agg(key_id) AS ids FROM (
	        SELECT key_id FROM key_tombstones
	         WHERE key_id IS NOT NULL AND created_at <= $2
	         ORDER BY created_at
	         LIMIT $3) b
	), gone AS (
	    DELETE FROM idempotency_keys k
	     WHERE k.id = ANY ((SELECT ids FROM batch)::bigint[])
	    RETURNING k.id, k.client_id, k.key, k.expires_at, k.order_id, k.refund_id
	), released AS (
	    UPDATE key_tombstones t SET key_id = NULL
	     WHERE t.key_id = ANY ((SELECT ids FROM batch)::bigint[]) AND t.key_id IS NOT NULL
	), ev AS (
	    INSERT INTO key_events (at, client_id, key, key_id, kind, detail)
	    SELECT $1, g.client_id, g.key, g.id, 'expired',
	           jsonb_strip_nulls(jsonb_build_object('expired_at', g.expires_at,
	               'order_id', (SELECT o.public_id FROM orders o WHERE o.id = g.order_id),
	               'refund_id', (SELECT r.public_id FROM refunds r WHERE r.id = g.refund_id)))
	      FROM gone g
	), notified AS (
	    ` + keyed.NotifyGoneSQL + `
	)
	SELECT coalesce(cardinality(ids), 0) FROM batch WHERE (SELECT count(*) FROM notified) >= 0`

// forgetBatchSQL deletes up to $2 tombstones whose grace ended by $1.
const forgetBatchSQL = `
	WITH gone AS (
	    DELETE FROM key_tombstones
	     WHERE (client_id, key) IN (
	           SELECT client_id, key FROM key_tombstones
	            WHERE forget_at <= $1 AND key_id IS NULL
	            ORDER BY forget_at
	            LIMIT $2)
	    RETURNING 1
	)
	SELECT count(*) FROM gone`

// eventsBatchSQL deletes up to $2 key events older than $1. Ids grow with time, so the
// oldest events are at the start of the primary key.
const eventsBatchSQL = `
	WITH gone AS (
	    DELETE FROM key_events
	     WHERE id IN (SELECT id FROM key_events WHERE at < $1 ORDER BY id LIMIT $2)
	    RETURNING 1
	)
	SELECT count(*) FROM gone`
