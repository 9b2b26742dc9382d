-- tekrar's inbox of its payment provider's webhooks. A provider delivers each event at
-- least once and in no particular order: the primary key (provider, event_id) makes a
-- redelivery a no-op that is only counted, and provider_charges keeps, per charge, the
-- sequence of the newest event applied, so that an older event arriving later never moves
-- a charge backwards. Both are written in the transaction that applies the event's effect.
-- A delivery whose signature or timestamp fails is refused before anything is stored.

-- +goose Up
CREATE TABLE provider_events (
    provider         text        NOT NULL CHECK (provider <> ''),
    event_id         text        NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
    type             text        NOT NULL CHECK (length(type) BETWEEN 1 AND 100),
    charge_id        text,
    sequence         integer     CHECK (sequence > 0),
    body             jsonb       NOT NULL,
    -- applied: its state is the charge's newest; stale: a newer event of the charge was
    -- applied first; ignored: a type tekrar does not act on, stored all the same.
    outcome          text        NOT NULL CHECK (outcome IN ('applied', 'stale', 'ignored')),
    received_at      timestamptz NOT NULL,
    deliveries       integer     NOT NULL DEFAULT 1 CHECK (deliveries > 0),
    last_delivery_at timestamptz NOT NULL,
    CONSTRAINT provider_events_pk PRIMARY KEY (provider, event_id),
    CONSTRAINT provider_events_charge_ck CHECK ((charge_id IS NULL) = (sequence IS NULL))
);
CREATE INDEX provider_events_received_idx ON provider_events (received_at DESC);
CREATE INDEX provider_events_charge_idx ON provider_events (provider, charge_id, sequence);

CREATE TABLE provider_charges (
    provider      text        NOT NULL,
    charge_id     text        NOT NULL,
    charge_key    text        NOT NULL,
    last_sequence integer     NOT NULL CHECK (last_sequence > 0),
    -- The charge as its newest applied event describes it.
    status        text        NOT NULL,
    amount        bigint      NOT NULL,
    currency      text        NOT NULL,
    refunded      bigint      NOT NULL,
    disputed      boolean     NOT NULL DEFAULT false,
    updated_at    timestamptz NOT NULL,
    CONSTRAINT provider_charges_pk PRIMARY KEY (provider, charge_id)
);
CREATE INDEX provider_charges_key_idx ON provider_charges (charge_key);

-- +goose Down
DROP TABLE provider_charges;
DROP TABLE provider_events;
