-- The sandbox payment provider's own ledger (package checkout/psp). It stands apart from
-- checkout's tables on purpose: it plays a remote card processor, so nothing in checkout
-- may join it or reference it.

-- +goose Up
CREATE TABLE psp_charges (
    id                     text        PRIMARY KEY CHECK (id LIKE 'ch\_%'),
    -- The provider-side idempotency key: one charge per key, whatever the concurrency.
    key                    text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    amount                 bigint      NOT NULL CHECK (amount > 0),
    currency               text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    -- SHA-256 of the card token, to recognise a repeated key sent with another card. The
    -- token itself is never stored.
    card_token_fingerprint bytea       NOT NULL CHECK (length(card_token_fingerprint) = 32),
    status                 text        NOT NULL CHECK (status IN ('succeeded', 'declined')),
    decline_code           text        NOT NULL DEFAULT '',
    card_brand             text        NOT NULL DEFAULT '',
    card_last4             text        NOT NULL DEFAULT '' CHECK (card_last4 ~ '^([0-9]{4})?$'),
    description            text        NOT NULL DEFAULT '',
    -- The sum of the refunds of this charge, kept in the same transaction as each refund
    -- insert, so that the CHECK below is what makes over-refunding impossible.
    refunded_amount        bigint      NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL,
    -- Orders charges created at the same instant.
    seq                    bigint      GENERATED ALWAYS AS IDENTITY,
    CONSTRAINT psp_charges_key_uq UNIQUE (key),
    CONSTRAINT psp_charges_decline_code_ck CHECK ((status = 'declined') = (decline_code <> '')),
    CONSTRAINT psp_charges_refunded_within_amount CHECK (
        refunded_amount >= 0 AND refunded_amount <= amount
        AND (status = 'succeeded' OR refunded_amount = 0))
);
CREATE INDEX psp_charges_created_idx ON psp_charges (created_at, seq);

CREATE TABLE psp_refunds (
    id          text        PRIMARY KEY CHECK (id LIKE 're\_%'),
    key         text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    charge_id   text        NOT NULL REFERENCES psp_charges (id),
    amount      bigint      NOT NULL CHECK (amount > 0),
    status      text        NOT NULL DEFAULT 'succeeded' CHECK (status = 'succeeded'),
    reason      text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    seq         bigint      GENERATED ALWAYS AS IDENTITY,
    CONSTRAINT psp_refunds_key_uq UNIQUE (key)
);
CREATE INDEX psp_refunds_charge_idx ON psp_refunds (charge_id);
CREATE INDEX psp_refunds_created_idx ON psp_refunds (created_at, seq);

-- +goose Down
DROP TABLE psp_refunds;
DROP TABLE psp_charges;
