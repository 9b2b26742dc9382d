package outbox

// claimSQL takes up to $1 of the oldest available events off the queue, skipping those
// another dispatcher holds, and reads them. The DELETE holds their rows until the
// dispatch's transaction ends: committed, they are dispatched; rolled back (or the
// connection lost), they are in the queue again. A queue row without its event (none is
// written so) is deleted and dispatches nothing.
//
// The rows are found by arrays of ids (= ANY (ARRAY(…))) rather than joins: the statement
// is prepared once per connection and soon runs on a generic plan, which cannot know that
// $1 is small, and which joined the claimed rows to the whole queue and the whole of
// outbox_events by hash (two sequential scans a batch, the second of every event ever
// written). An array of ids is looked up through each primary key whatever its length
// (TestTheClaimsGenericPlansUseTheirIndexes).
const claimSQL = `-- name: OutboxClaim :many
WITH claimed AS (
    DELETE FROM outbox_queue
     WHERE event_id = ANY (ARRAY(SELECT event_id FROM outbox_queue
                                  WHERE discarded_at IS NULL AND available_at <= now()
                                  ORDER BY available_at
                                  LIMIT $1
                                    FOR UPDATE SKIP LOCKED))
    RETURNING event_id
)
SELECT e.id, e.client_id, e.type, e.order_id, e.payload, e.created_at
  FROM outbox_events e
 WHERE e.id = ANY (ARRAY(SELECT event_id FROM claimed))
 ORDER BY e.created_at, e.id`

// claimOneSQL takes event $1 off the queue, unless another dispatcher holds it, whether
// or not its retry is due: the events of a batch that rolled back, one at a time. Shaped
// as claimSQL, for the same reason.
const claimOneSQL = `-- name: OutboxClaimOne :many
WITH claimed AS (
    DELETE FROM outbox_queue
     WHERE event_id = ANY (ARRAY(SELECT event_id FROM outbox_queue
                                  WHERE event_id = $1 AND discarded_at IS NULL
                                    FOR UPDATE SKIP LOCKED))
    RETURNING event_id
)
SELECT e.id, e.client_id, e.type, e.order_id, e.payload, e.created_at
  FROM outbox_events e
 WHERE e.id = ANY (ARRAY(SELECT event_id FROM claimed))`

// holdSQL bounds how long the dispatch's transaction may stay idle (a process frozen
// between two statements) before Postgres ends it and frees its rows.
const holdSQL = `-- name: OutboxHold :exec
SELECT set_config('idle_in_transaction_session_timeout', $1, true)`

// failedSQL records a failed dispatch of event $1 with its error $2: the next attempt
// after attempt⁴ seconds (at most a day), and the event discarded at its $3rd failure.
const failedSQL = `
UPDATE outbox_queue
   SET attempts = attempts + 1,
       last_error = $2,
       available_at = now() + least(power(attempts + 1, 4), 86400) * interval '1 second',
       discarded_at = CASE WHEN attempts + 1 >= $3 THEN now() END
 WHERE event_id = $1 AND discarded_at IS NULL`
