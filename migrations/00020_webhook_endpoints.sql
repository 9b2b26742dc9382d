-- Client webhooks: where each client wants its events sent, the secrets they are signed
-- with, and one delivery per (event, endpoint) with every attempt made for it.
--
-- webhook_endpoints: an endpoint is never deleted, only marked deleted_at, so that the
-- console keeps its deliveries and attempts; the API no longer shows it and nothing more is
-- sent to it. disabled_at and disabled_reason go together: an endpoint that failed every
-- delivery for the whole retry horizon is disabled, and the console says why.
--
-- webhook_endpoint_secrets: several per endpoint, for rotation. The signer must compute an
-- HMAC with the secret, so it cannot be stored hashed like client secrets: it is sealed
-- with AES-256-GCM under TEKRAR_SECRETS_KEY (a random 12-byte nonce, then the ciphertext
-- and its tag). The current secret has no expires_at; a rotated-out one signs beside it
-- until its expires_at (the overlap), then never again.
--
-- webhook_deliveries: UNIQUE (event_id, endpoint_id) makes the fan-out of an event (which
-- the outbox may run more than once after a crash) create one delivery per endpoint. The
-- payload is the exact body sent: every retry and every manual redelivery sends the same
-- bytes under the same webhook-id (the event's id), which is what a consumer deduplicates
-- by. state moves pending -> succeeded, or pending -> dead when the horizon passes.
--
-- webhook_attempts: one row per HTTP request made (or that failed to be made), with
-- bounded excerpts of the error and the response, for the console.

-- +goose Up
CREATE DOMAIN webhook_endpoint_public_id AS text CHECK (VALUE ~ '^we_[0-9a-f]{32}$');

CREATE TABLE webhook_endpoints (
    id              bigserial   PRIMARY KEY,
    public_id       webhook_endpoint_public_id NOT NULL
                        DEFAULT ('we_' || replace(gen_random_uuid()::text, '-', '')),
    client_id       bigint      NOT NULL REFERENCES clients (id),
    url             text        NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    event_types     text[]      NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 50),
    created_at      timestamptz NOT NULL,
    disabled_at     timestamptz,
    disabled_reason text        CHECK (length(disabled_reason) <= 500),
    deleted_at      timestamptz,
    CONSTRAINT webhook_endpoints_public_id_uq UNIQUE (public_id),
    CONSTRAINT webhook_endpoints_disabled_ck CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL))
);
CREATE INDEX webhook_endpoints_client_idx ON webhook_endpoints (client_id, created_at DESC);

CREATE TABLE webhook_endpoint_secrets (
    id          bigserial   PRIMARY KEY,
    endpoint_id bigint      NOT NULL REFERENCES webhook_endpoints (id),
    sealed      bytea       NOT NULL CHECK (length(sealed) BETWEEN 29 AND 200),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz
);
CREATE INDEX webhook_endpoint_secrets_endpoint_idx ON webhook_endpoint_secrets (endpoint_id, created_at DESC);

CREATE TABLE webhook_deliveries (
    id              bigserial   PRIMARY KEY,
    event_id        text        NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
    event_type      text        NOT NULL CHECK (length(event_type) BETWEEN 1 AND 100),
    endpoint_id     bigint      NOT NULL REFERENCES webhook_endpoints (id),
    payload         text        NOT NULL,
    state           text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'succeeded', 'dead')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz,
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text        CHECK (length(last_error) <= 500),
    finished_at     timestamptz,
    CONSTRAINT webhook_deliveries_event_endpoint_uq UNIQUE (event_id, endpoint_id),
    CONSTRAINT webhook_deliveries_finished_ck CHECK ((state = 'pending') = (finished_at IS NULL))
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC);
CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (finished_at DESC) WHERE state = 'dead';

CREATE TABLE webhook_attempts (
    id               bigserial   PRIMARY KEY,
    delivery_id      bigint      NOT NULL REFERENCES webhook_deliveries (id),
    attempted_at     timestamptz NOT NULL,
    -- manual: a redelivery an operator asked for (audited), not one of the schedule's.
    manual           boolean     NOT NULL DEFAULT false,
    status_code      integer,
    latency_ms       integer     NOT NULL CHECK (latency_ms >= 0),
    error            text        CHECK (length(error) <= 500),
    response_excerpt text        CHECK (length(response_excerpt) <= 1024)
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempted_at);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoint_secrets;
DROP TABLE webhook_endpoints;
DROP DOMAIN webhook_endpoint_public_id;
