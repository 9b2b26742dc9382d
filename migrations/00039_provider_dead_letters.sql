-- Dead letters of the provider inbox. A delivery whose signature is valid is the provider's
-- word, but some such deliveries cannot be stored as provider_events (text with a NUL
-- character or bytes that are not UTF-8, which neither text nor jsonb holds; a sequence
-- beyond the integer column; a body that is not an event at all) or are refused by the
-- database as data while being applied. Answering them 500 made the provider resend them
-- until it gave up, and the event was lost. They are kept here instead, as the raw bytes
-- that arrived (bytea: whatever they hold), acknowledged, shown on the console's inbox
-- page, and replayed by an admin once tekrar can take them.
--
-- One row per (provider, body): a redelivery carries the same body (the signature, which
-- differs, is in the headers) and only counts. webhook_id is the signed webhook-id header,
-- cleaned to storable text; reason is a fixed vocabulary, detail says what tekrar refused
-- (never the body's content).

-- +goose Up
CREATE TABLE provider_dead_letters (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider         text        NOT NULL CHECK (provider <> ''),
    webhook_id       text        NOT NULL CHECK (length(webhook_id) BETWEEN 1 AND 255),
    body             bytea       NOT NULL,
    body_sha256      bytea       NOT NULL CHECK (length(body_sha256) = 32),
    reason           text        NOT NULL CHECK (reason IN ('not_an_event', 'not_text', 'out_of_range', 'refused_by_store')),
    detail           text        NOT NULL CHECK (length(detail) <= 500),
    -- dead: waiting for an operator; replayed: applied by a replay (replay_outcome says how).
    state            text        NOT NULL DEFAULT 'dead' CHECK (state IN ('dead', 'replayed')),
    deliveries       integer     NOT NULL DEFAULT 1 CHECK (deliveries > 0),
    received_at      timestamptz NOT NULL,
    last_delivery_at timestamptz NOT NULL,
    replayed_at      timestamptz,
    replay_outcome   text        CHECK (replay_outcome IN ('applied', 'stale', 'ignored', 'duplicate')),
    CONSTRAINT provider_dead_letters_body_key UNIQUE (provider, body_sha256),
    CONSTRAINT provider_dead_letters_replay_ck CHECK ((state = 'replayed') = (replayed_at IS NOT NULL AND replay_outcome IS NOT NULL))
);
CREATE INDEX provider_dead_letters_received_idx ON provider_dead_letters (received_at DESC);

-- +goose Down
DROP TABLE provider_dead_letters;
