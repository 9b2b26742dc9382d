-- Per-minute counts of key events, so that the console's overview and replay chart read
-- one row per minute, client and kind instead of every event in the window: at a million
-- orders a day, counting a day's 2 million events took about a second.
--
-- Triggers on key_events keep the counts, for every writer at once (the batched event
-- writer, the sweeper's expired events, the event retention's deletes), so a count always
-- equals what a count(*) of the events would say. They are statement-level, with
-- transition tables: one upsert per minute, client and kind of a batch, in a fixed order,
-- so that two batches touching the same rows wait for each other instead of deadlocking.
-- ENABLE ALWAYS keeps them firing for sessions in replica mode (bulk loads).
--
-- Queries read whole minutes here and the ragged edges of a window from key_events
-- (checkout/queries_overview.go).

-- +goose Up
CREATE TABLE key_event_counts (
    minute    timestamptz NOT NULL,
    client_id bigint      NOT NULL,
    kind      text        NOT NULL,
    n         bigint      NOT NULL CHECK (n >= 0),
    PRIMARY KEY (minute, client_id, kind)
);

INSERT INTO key_event_counts (minute, client_id, kind, n)
SELECT date_trunc('minute', at, 'UTC'), client_id, kind, count(*) FROM key_events GROUP BY 1, 2, 3;

-- +goose StatementBegin
CREATE FUNCTION key_event_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO key_event_counts AS c (minute, client_id, kind, n)
    SELECT date_trunc('minute', at, 'UTC'), client_id, kind, count(*)
      FROM new_events GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (minute, client_id, kind) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION key_event_counts_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE key_event_counts c SET n = c.n - o.n
      FROM (SELECT date_trunc('minute', at, 'UTC') AS minute, client_id, kind, count(*) AS n
              FROM old_events GROUP BY 1, 2, 3 ORDER BY 1, 2, 3) o
     WHERE c.minute = o.minute AND c.client_id = o.client_id AND c.kind = o.kind;
    DELETE FROM key_event_counts c
     WHERE c.n = 0 AND (c.minute, c.client_id, c.kind) IN
           (SELECT date_trunc('minute', at, 'UTC'), client_id, kind FROM old_events);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER key_events_count_insert AFTER INSERT ON key_events
    REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION key_event_counts_add();
CREATE TRIGGER key_events_count_delete AFTER DELETE ON key_events
    REFERENCING OLD TABLE AS old_events FOR EACH STATEMENT EXECUTE FUNCTION key_event_counts_remove();
ALTER TABLE key_events ENABLE ALWAYS TRIGGER key_events_count_insert;
ALTER TABLE key_events ENABLE ALWAYS TRIGGER key_events_count_delete;

-- +goose Down
DROP TRIGGER key_events_count_delete ON key_events;
DROP TRIGGER key_events_count_insert ON key_events;
DROP FUNCTION key_event_counts_remove();
DROP FUNCTION key_event_counts_add();
DROP TABLE key_event_counts;
