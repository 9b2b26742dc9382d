-- Giving up on a charge safely.
--
-- When a worker stalls past its lease (a SIGSTOP, a GC pause, a VM migration) while its
-- charge is still in flight at the provider, the completer may find no charge yet. "Not
-- found" is not "never will be", so before an order is canceled as "nothing was charged":
--
-- 1. the sandbox provider can fence a charge key, as a real processor's payment-intent
--    cancel does: a canceled key is a row of psp_charges with status 'canceled' and no
--    amount, currency or card, so the UNIQUE constraint on key decides between a cancel and
--    a late charge racing for the same key;
-- 2. where a provider cannot fence, the cancel writes, in the same transaction, a
--    compensation: a refund tekrar owes if a charge still appears under the key. A worker
--    in every serve process drives it (look the key up, refund under a key derived from the
--    compensation, retry with backoff across crashes and outages) until the refund is made
--    or the provider's processing horizon has passed with no charge.

-- +goose Up
ALTER DOMAIN psp_charge_status DROP CONSTRAINT psp_charge_status_check;
ALTER DOMAIN psp_charge_status ADD CONSTRAINT psp_charge_status_check
    CHECK (VALUE IN ('succeeded', 'declined', 'canceled'));
ALTER TABLE psp_charges
    ALTER COLUMN amount DROP NOT NULL,
    ALTER COLUMN currency DROP NOT NULL,
    ALTER COLUMN card_token_fingerprint DROP NOT NULL,
    DROP CONSTRAINT psp_charges_decline_code_ck,
    -- One CHECK for the row's shape (a table CHECK costs every write its planning; see 00010).
    ADD CONSTRAINT psp_charges_shape_ck CHECK (
        (status = 'declined') = (decline_code <> '')
        AND (status = 'canceled') = (card_token_fingerprint IS NULL)
        AND (status = 'canceled') = (amount IS NULL)
        AND (amount IS NULL) = (currency IS NULL));

CREATE DOMAIN compensation_state AS text CHECK (VALUE IN ('watching', 'refunded', 'no_charge'));

CREATE TABLE compensations (
    id              bigint             GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id       bigint             NOT NULL REFERENCES clients (id),
    -- One compensation per order: the order whose charge key was given up on.
    order_id        bigint             NOT NULL REFERENCES orders (id),
    -- The provider-side key of the charge that may still appear.
    charge_key      idempotency_key    NOT NULL,
    reason          text               NOT NULL,
    state           compensation_state NOT NULL DEFAULT 'watching',
    -- What the provider said, once it said it.
    charge_id       text,
    refund_id       text,
    amount          positive_amount,
    currency        currency_code,
    attempts        integer            NOT NULL DEFAULT 0,
    last_error      text,
    -- The worker's next look: a worker takes a row by moving this past its own lease, so a
    -- worker that stalls gives the row back by itself.
    next_attempt_at timestamptz        NOT NULL,
    -- Past this, "no charge under the key" is final: no request sent before the cancel can
    -- still be processed.
    watch_until     timestamptz        NOT NULL,
    created_at      timestamptz        NOT NULL,
    settled_at      timestamptz,
    CONSTRAINT compensations_order_uq UNIQUE (order_id),
    CONSTRAINT compensations_settled_ck CHECK (
        (state = 'watching') = (settled_at IS NULL)
        AND (state = 'refunded') = (refund_id IS NOT NULL)
        AND (refund_id IS NULL OR (charge_id IS NOT NULL AND amount IS NOT NULL AND currency IS NOT NULL)))
);
CREATE INDEX compensations_due_idx ON compensations (next_attempt_at) WHERE state = 'watching';
CREATE INDEX compensations_client_created_idx ON compensations (client_id, created_at DESC);

-- +goose Down
DROP TABLE compensations;
DROP DOMAIN compensation_state;
DELETE FROM psp_charges WHERE status = 'canceled';
ALTER TABLE psp_charges
    DROP CONSTRAINT psp_charges_shape_ck,
    ADD CONSTRAINT psp_charges_decline_code_ck CHECK ((status = 'declined') = (decline_code <> '')),
    ALTER COLUMN amount SET NOT NULL,
    ALTER COLUMN currency SET NOT NULL,
    ALTER COLUMN card_token_fingerprint SET NOT NULL;
ALTER DOMAIN psp_charge_status DROP CONSTRAINT psp_charge_status_check;
ALTER DOMAIN psp_charge_status ADD CONSTRAINT psp_charge_status_check
    CHECK (VALUE IN ('succeeded', 'declined'));
