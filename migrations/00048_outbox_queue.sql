-- The outbox's own queue. Until now the trigger of migration 19 inserted a River job per
-- event, and each event was dispatched by its own job: fetched, run in its own transaction,
-- completed. Measured under first-arrival load that lifecycle, not the event, was the
-- largest cost of a payment after its own commits (docs/performance.md). Now the trigger
-- inserts a row here per event, in the same statement as before, and each process's
-- dispatchers (checkout/outbox) take many rows at a time: one transaction deletes them,
-- calls the handlers for each event and commits, so that the rows are gone exactly when the
-- handlers' work committed. A dispatcher that dies or is frozen holds its rows only by the
-- locks of its open transaction: Postgres ends the transaction (its connection lost, or
-- idle_in_transaction_session_timeout) and the rows are there again, for another
-- dispatcher.
--
-- A row is an event not yet dispatched. attempts counts its failed dispatches; after a
-- failure it waits until available_at; after the last attempt discarded_at is set and it
-- stays for the console, until an operator dispatches it again. No foreign key to
-- outbox_events: the trigger inserts from the events' own transition table, and a foreign
-- key would cost each insert a lookup and a row lock on the event.
--
-- River's dispatch jobs not yet completed move here (their attempts, schedule and last
-- error with them); completed ones are left to River's cleaner. A process of the release
-- before, still running during a rolling upgrade, finds no dispatch job to work; the events
-- it writes go through the new trigger. An event whose job an old process was running is
-- dispatched again here, which the handlers' idempotence makes harmless.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE outbox_queue (
    event_id     event_public_id NOT NULL,
    attempts     integer         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    available_at timestamptz     NOT NULL DEFAULT now(),
    last_error   text,
    discarded_at timestamptz,
    CONSTRAINT outbox_queue_pk PRIMARY KEY (event_id)
);
-- The dispatchers take the oldest available rows first.
CREATE INDEX outbox_queue_available_idx ON outbox_queue (available_at) WHERE discarded_at IS NULL;

WITH moved AS (
    DELETE FROM river_job WHERE kind = 'outbox_dispatch' AND state <> 'completed'
    RETURNING args->>'event_id' AS event_id, state, attempt, scheduled_at, finalized_at,
              errors[array_length(errors, 1)]->>'error' AS last_error, id
)
INSERT INTO outbox_queue (event_id, attempts, available_at, last_error, discarded_at)
SELECT DISTINCT ON (m.event_id) m.event_id, greatest(m.attempt, 0), m.scheduled_at, m.last_error,
       CASE WHEN m.state = 'discarded' THEN coalesce(m.finalized_at, now()) END
  FROM moved m
 WHERE m.state <> 'cancelled' AND EXISTS (SELECT 1 FROM outbox_events e WHERE e.id = m.event_id)
 ORDER BY m.event_id, m.id DESC;

CREATE OR REPLACE FUNCTION outbox_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_queue (event_id) SELECT e.id FROM new_events e;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO river_job (kind, args, queue, max_attempts, priority, state, scheduled_at,
                           unique_key, unique_states)
    SELECT 'outbox_dispatch', jsonb_build_object('event_id', e.id), 'outbox', 25, 1,
           'available', now(),
           sha256(convert_to('&kind=outbox_dispatch&args={"event_id":"' || e.id || '"}', 'UTF8')),
           B'11110101'
      FROM new_events e
    ON CONFLICT (unique_key)
       WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL
         AND river_job_state_in_bitmask(unique_states, state)
    DO NOTHING;
    RETURN NULL;
END
$$;

INSERT INTO river_job (kind, args, queue, max_attempts, priority, state, scheduled_at, attempt,
                       finalized_at, unique_key, unique_states)
SELECT 'outbox_dispatch', jsonb_build_object('event_id', q.event_id), 'outbox', 25, 1,
       CASE WHEN q.discarded_at IS NULL THEN 'available' ELSE 'discarded' END::river_job_state,
       q.available_at, q.attempts, q.discarded_at,
       sha256(convert_to('&kind=outbox_dispatch&args={"event_id":"' || q.event_id || '"}', 'UTF8')),
       B'11110101'
  FROM outbox_queue q
ON CONFLICT DO NOTHING;

DROP TABLE outbox_queue;
-- +goose StatementEnd
