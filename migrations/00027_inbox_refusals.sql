-- Refused provider webhooks, counted. A delivery whose signature, timestamp or id fails is
-- refused and nothing of it is kept: not its body, not the event id it claims (a key an
-- attacker chooses would let them fill the table). What is kept is a counter per minute
-- and reason class, a fixed vocabulary tekrar chooses, so the table holds at most
-- (reasons x minutes kept) rows however many deliveries are refused: the upsert that counts
-- also deletes the buckets older than seven days. last_remote is the (truncated) address of
-- the newest refusal of the bucket, for the operator to tell a broken provider from a probe.
--
-- apply_failed counts verified events whose effect failed: their transaction rolled back
-- (so provider_events has no row of them) and the provider delivers them again.

-- +goose Up
CREATE TABLE provider_inbox_refusals (
    bucket      timestamptz NOT NULL CHECK (bucket = date_trunc('minute', bucket, 'UTC')),
    reason      text        NOT NULL CHECK (reason IN ('bad_signature', 'stale', 'future', 'malformed_headers',
                                                       'id_mismatch', 'apply_failed')),
    count       bigint      NOT NULL CHECK (count > 0),
    last_at     timestamptz NOT NULL,
    last_remote text        NOT NULL CHECK (length(last_remote) <= 64),
    PRIMARY KEY (bucket, reason)
);

-- +goose Down
DROP TABLE provider_inbox_refusals;
