-- Nightly settlement: one row per client and business day (the day in the client's time
-- zone, clients.time_zone), with the day's money movements totalled per currency.
--
-- Exactly once, by construction rather than by care: every money movement (a capture, a
-- refund, a dispute's opening, a compensation's refund) is claimed by one settlement in
-- settlement_items, whose primary key is the movement itself (kind, source_id). A
-- settlement claims the unclaimed movements of its own day, and the unclaimed movements of
-- earlier days that are already settled: those arrived after their day closed and are its
-- adjustments (adjusted = true, day = the day they belong to). A rerun of a day, two runs at
-- once, or a run after a crash claim nothing twice: the insert of a claimed movement does
-- nothing, and the settlement row itself is UNIQUE (client_id, day), written with its
-- totals in the transaction that claims its items, never updated afterwards.
--
-- The day's window is stored ([starts_at, ends_at) in UTC, with the zone it was computed
-- in): a 23- or 25-hour day, or a later change of the client's zone, leaves the row saying
-- exactly which instants it covered.
--
-- The indexes on the movements' tables serve the claim, which reads a client's unclaimed
-- movements of a window by the time they count at.

-- +goose Up
CREATE DOMAIN settlement_item_kind AS text CHECK (VALUE IN ('capture', 'refund', 'dispute', 'compensation'));

CREATE TABLE settlements (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id  bigint      NOT NULL REFERENCES clients (id),
    day        date        NOT NULL,
    time_zone  text        NOT NULL CHECK (time_zone <> ''),
    starts_at  timestamptz NOT NULL,
    ends_at    timestamptz NOT NULL,
    settled_at timestamptz NOT NULL,
    -- host:pid of the process that wrote the row.
    process    text        NOT NULL CHECK (process <> ''),
    CONSTRAINT settlements_client_day_uq UNIQUE (client_id, day),
    CONSTRAINT settlements_window_ck CHECK (starts_at < ends_at)
);
CREATE INDEX settlements_day_idx ON settlements (day DESC, client_id);

-- A settlement's figures of its own day, one row per currency (none on a day with no
-- movement). Adjustments are not in them: they are the settlement's adjusted items.
CREATE TABLE settlement_totals (
    settlement_id      bigint        NOT NULL REFERENCES settlements (id),
    currency           currency_code NOT NULL,
    captured_amount    bigint        NOT NULL CHECK (captured_amount >= 0),
    captured_count     integer       NOT NULL CHECK (captured_count >= 0),
    refunded_amount    bigint        NOT NULL CHECK (refunded_amount >= 0),
    refunded_count     integer       NOT NULL CHECK (refunded_count >= 0),
    disputed_amount    bigint        NOT NULL CHECK (disputed_amount >= 0),
    disputed_count     integer       NOT NULL CHECK (disputed_count >= 0),
    compensated_amount bigint        NOT NULL CHECK (compensated_amount >= 0),
    compensated_count  integer       NOT NULL CHECK (compensated_count >= 0),
    PRIMARY KEY (settlement_id, currency)
);

CREATE TABLE settlement_items (
    kind          settlement_item_kind NOT NULL,
    -- capture: the order; refund: refunds.id; dispute: order_disputes.id; compensation:
    -- compensations.id.
    source_id     bigint               NOT NULL,
    client_id     bigint               NOT NULL REFERENCES clients (id),
    settlement_id bigint               NOT NULL REFERENCES settlements (id),
    -- The business day the movement belongs to; before the settlement's own day when it
    -- came after that day was settled (adjusted).
    day           date                 NOT NULL,
    adjusted      boolean              NOT NULL,
    occurred_at   timestamptz          NOT NULL,
    amount        positive_amount      NOT NULL,
    currency      currency_code        NOT NULL,
    order_id      bigint               REFERENCES orders (id),
    PRIMARY KEY (kind, source_id)
);
CREATE INDEX settlement_items_settlement_idx ON settlement_items (settlement_id);
CREATE INDEX settlement_items_adjusted_idx ON settlement_items (client_id, day) WHERE adjusted;

CREATE INDEX payments_settle_idx ON payments (created_at) WHERE status = 'succeeded';
CREATE INDEX refunds_settle_idx ON refunds (client_id, updated_at) WHERE status = 'succeeded';
CREATE INDEX compensations_settle_idx ON compensations (client_id, settled_at) WHERE state = 'refunded';
CREATE INDEX order_disputes_opened_idx ON order_disputes (opened_at);

-- +goose Down
DROP INDEX order_disputes_opened_idx;
DROP INDEX compensations_settle_idx;
DROP INDEX refunds_settle_idx;
DROP INDEX payments_settle_idx;
DROP TABLE settlement_items;
DROP TABLE settlement_totals;
DROP TABLE settlements;
DROP DOMAIN settlement_item_kind;
