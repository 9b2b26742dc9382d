-- Reconciliation: a job walks the payment provider's charges of a window against tekrar's
-- orders (checkout/reconcile.go).
--
-- A charge that belongs to no order that can complete with it (no order at all, or an
-- order canceled or declined, or one paid by another charge) is refunded automatically. The
-- debt is a row of compensations, the table the completer already drives, so the refund is
-- made by the same worker, under a provider key derived from the charge key, retried until
-- it succeeds. Such a charge may have no order: order_id and client_id become nullable, and
-- source says who wrote the row.
--
-- One compensation per charge: UNIQUE (charge_key). Two runs at once, a run killed and run
-- again, a canceled order's own compensation and a run that meets its late charge all write
-- the same row, and only the first insert counts. (Every existing row already has its own
-- charge key: a key belongs to one order.)
--
-- Findings (a charge with no completable order, an amount that differs, an order paid
-- with no charge at the provider) are keyed by (kind, charge_id): a rerun updates when it
-- last saw one, and adds no row. Each run is recorded with its window, what it counted and
-- the process that ran it; a run killed half way stays without finished_at.
--
-- The refunds a run makes are not an operator's: the audit log gets system entries, with
-- an actor instead of an operator.

-- +goose Up
CREATE DOMAIN compensation_source AS text CHECK (VALUE IN ('cancel', 'reconcile'));
CREATE DOMAIN reconciliation_finding_kind AS text
    CHECK (VALUE IN ('orphan_charge', 'amount_mismatch', 'paid_without_charge'));

ALTER TABLE compensations
    ALTER COLUMN order_id DROP NOT NULL,
    ALTER COLUMN client_id DROP NOT NULL,
    ADD COLUMN source compensation_source NOT NULL DEFAULT 'cancel',
    ADD CONSTRAINT compensations_charge_key_uq UNIQUE (charge_key),
    -- One CHECK for the row's shape (see 00010): the settlement rules of 00011, and only a
    -- charge found by reconciliation may have no order.
    DROP CONSTRAINT compensations_settled_ck,
    ADD CONSTRAINT compensations_settled_ck CHECK (
        (state = 'watching') = (settled_at IS NULL)
        AND (state = 'refunded') = (refund_id IS NOT NULL)
        AND (refund_id IS NULL OR (charge_id IS NOT NULL AND amount IS NOT NULL AND currency IS NOT NULL))
        AND (order_id IS NULL) = (client_id IS NULL)
        AND (order_id IS NOT NULL OR source = 'reconcile'));

CREATE TABLE reconciliation_runs (
    id                    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- host:pid of the process, and whether an operator ran it or serve's schedule did.
    process               text        NOT NULL CHECK (process <> ''),
    scheduled             boolean     NOT NULL,
    window_start          timestamptz NOT NULL,
    window_end            timestamptz NOT NULL,
    started_at            timestamptz NOT NULL,
    finished_at           timestamptz,
    charges_seen          integer     NOT NULL DEFAULT 0,
    orphans               integer     NOT NULL DEFAULT 0,
    compensations_created integer     NOT NULL DEFAULT 0,
    refunds_made          integer     NOT NULL DEFAULT 0,
    mismatches            integer     NOT NULL DEFAULT 0,
    paid_without_charge   integer     NOT NULL DEFAULT 0,
    error                 text,
    CONSTRAINT reconciliation_runs_window_ck CHECK (window_start < window_end)
);
CREATE INDEX reconciliation_runs_started_idx ON reconciliation_runs (started_at DESC, id DESC);

CREATE TABLE reconciliation_findings (
    id                bigint                      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind              reconciliation_finding_kind NOT NULL,
    -- The provider's charge; for paid_without_charge, the one tekrar's payment names.
    charge_id         text                        NOT NULL CHECK (charge_id <> ''),
    charge_key        text,
    -- The order the charge names or is recorded on, if tekrar has one.
    order_id          bigint                      REFERENCES orders (id),
    provider_amount   bigint,
    provider_currency text,
    order_amount      bigint,
    order_currency    text,
    detail            text                        NOT NULL,
    first_run_id      bigint                      NOT NULL REFERENCES reconciliation_runs (id),
    last_run_id       bigint                      NOT NULL REFERENCES reconciliation_runs (id),
    found_at          timestamptz                 NOT NULL,
    last_seen_at      timestamptz                 NOT NULL,
    CONSTRAINT reconciliation_findings_uq UNIQUE (kind, charge_id)
);
CREATE INDEX reconciliation_findings_found_idx ON reconciliation_findings (found_at DESC, id DESC);

ALTER TABLE audit_log
    ALTER COLUMN operator_id DROP NOT NULL,
    ADD COLUMN actor text CHECK (actor <> ''),
    ADD CONSTRAINT audit_log_actor_ck CHECK ((operator_id IS NULL) <> (actor IS NULL));

-- +goose Down
DELETE FROM audit_log WHERE operator_id IS NULL;
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_actor_ck,
    DROP COLUMN actor,
    ALTER COLUMN operator_id SET NOT NULL;
DROP TABLE reconciliation_findings;
DROP TABLE reconciliation_runs;
DELETE FROM compensations WHERE order_id IS NULL;
ALTER TABLE compensations
    DROP CONSTRAINT compensations_settled_ck,
    ADD CONSTRAINT compensations_settled_ck CHECK (
        (state = 'watching') = (settled_at IS NULL)
        AND (state = 'refunded') = (refund_id IS NOT NULL)
        AND (refund_id IS NULL OR (charge_id IS NOT NULL AND amount IS NOT NULL AND currency IS NOT NULL))),
    DROP CONSTRAINT compensations_charge_key_uq,
    DROP COLUMN source,
    ALTER COLUMN client_id SET NOT NULL,
    ALTER COLUMN order_id SET NOT NULL;
DROP DOMAIN reconciliation_finding_kind;
DROP DOMAIN compensation_source;
