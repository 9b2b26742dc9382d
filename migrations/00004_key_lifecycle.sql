-- Key lifecycle: the history of every keyed request, expiry with tombstones, and a record of
-- each sweep. Also the indexes the operator console searches with.

-- +goose Up
-- How long a swept key's tombstone refuses late retries before the key is forgotten.
ALTER TABLE clients
    ADD COLUMN tombstone_grace interval NOT NULL DEFAULT interval '30 days'
        CHECK (tombstone_grace BETWEEN interval '1 hour' AND interval '365 days');

-- One row per keyed request that reached its key (and one per sweep of a key). Written
-- asynchronously in batches: the newest few can be lost in a crash, never a key or an order.
CREATE TABLE key_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL,
    client_id   bigint      NOT NULL,
    key         text        NOT NULL,
    key_id      bigint,
    kind        text        NOT NULL CHECK (kind IN ('created', 'replayed', 'reused_conflict',
                                'in_use_rejected', 'resumed', 'completed', 'expired', 'late_retry')),
    status      int,
    request_id  text,
    remote_addr text,
    user_agent  text,
    -- The fingerprint of this request, where it matters (a conflict: what differed).
    fingerprint bytea,
    detail      jsonb
);
-- A key's timeline, and events of one kind over a time range (replays, conflicts...).
CREATE INDEX key_events_key_idx ON key_events (client_id, key, at);
CREATE INDEX key_events_kind_at_idx ON key_events (kind, at);
CREATE INDEX key_events_client_at_idx ON key_events (client_id, at);

-- What stays of a swept key for a grace period: enough to refuse a very late retry and to
-- name the order it made. key_id is the swept row until it is deleted (see the sweeper).
CREATE TABLE key_tombstones (
    client_id   bigint      NOT NULL,
    key         text        NOT NULL,
    key_id      bigint,
    fingerprint bytea       NOT NULL,
    method      text        NOT NULL,
    path        text        NOT NULL,
    order_id    bigint,
    refund_id   bigint,
    first_seen  timestamptz NOT NULL,
    expired_at  timestamptz NOT NULL,
    forget_at   timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (client_id, key)
);
CREATE INDEX key_tombstones_pending_idx ON key_tombstones (created_at) WHERE key_id IS NOT NULL;
CREATE UNIQUE INDEX key_tombstones_key_id_idx ON key_tombstones (key_id) WHERE key_id IS NOT NULL;
CREATE INDEX key_tombstones_forget_idx ON key_tombstones (forget_at);
CREATE INDEX key_tombstones_order_idx ON key_tombstones (order_id) WHERE order_id IS NOT NULL;

-- One row per sweep pass.
CREATE TABLE sweeps (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at          timestamptz NOT NULL,
    finished_at         timestamptz NOT NULL,
    node                text        NOT NULL,
    keys_tombstoned     bigint      NOT NULL,
    keys_deleted        bigint      NOT NULL,
    tombstones_forgotten bigint     NOT NULL,
    events_deleted      bigint      NOT NULL,
    batches             int         NOT NULL,
    error               text
);

-- Every index here is paid for on the first-time path (the claim inserts into each, and the
-- completion, which changes indexed columns, again), so there are few:
-- expiry order, for the sweeper and "expiring in the next hour";
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at, id);
-- a client's keys newest first (the console's key list; all clients' newest first walks
-- the primary key backwards, as ids grow with time);
CREATE INDEX idempotency_keys_client_created_idx ON idempotency_keys (client_id, created_at DESC);
-- the few keys that are not completed, by state (in progress, needing attention): the
-- console's state filter and the completer's work list.
CREATE INDEX idempotency_keys_open_idx ON idempotency_keys (state, created_at DESC) WHERE state <> 'completed';

-- +goose Down
DROP INDEX idempotency_keys_open_idx;
DROP INDEX idempotency_keys_client_created_idx;
DROP INDEX idempotency_keys_expires_idx;
DROP TABLE sweeps;
DROP TABLE key_tombstones;
DROP TABLE key_events;
ALTER TABLE clients DROP COLUMN tombstone_grace;
