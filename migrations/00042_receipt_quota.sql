-- Receipts are counted per client: at most TEKRAR_RECEIPTS_PER_MINUTE in a minute and
-- TEKRAR_RECEIPTS_PER_DAY in a UTC day. Without a bound any API client could have tekrar
-- mail its own text to any address for the price of a cash sale of 0.01.
--
-- receipt_counts holds one row per client and window (a minute, or a day: kind), counted by
-- the statement that takes a receipt's place, in the transaction that records the receipt:
--   INSERT ... ON CONFLICT DO UPDATE SET sent = sent + 1 WHERE receipt_counts.sent < cap
-- The row's lock serialises a client's concurrent receipts, so a cap holds whatever the
-- concurrency, and a dispatch rolled back takes its count back with it. A client's first
-- receipt of a day deletes its minute rows of the days before; its day rows stay, one a day.
--
-- A receipt over a bound is kept, never sent: state 'refused', with refused_reason
-- 'rate_limited' (the minute's) or 'daily_cap' (the day's). The order it belongs to is not
-- touched: a receipt is never a reason to refuse a payment.

-- +goose Up
CREATE TABLE receipt_counts (
    client_id    bigint      NOT NULL REFERENCES clients (id),
    kind         text        NOT NULL CHECK (kind IN ('minute', 'day')),
    window_start timestamptz NOT NULL,
    sent         int         NOT NULL CHECK (sent >= 0),
    PRIMARY KEY (client_id, kind, window_start)
);

ALTER TABLE receipts ADD COLUMN refused_reason text CHECK (refused_reason IN ('rate_limited', 'daily_cap'));
ALTER TABLE receipts DROP CONSTRAINT receipts_state_check;
ALTER TABLE receipts ADD CONSTRAINT receipts_state_check CHECK (state IN ('kept', 'queued', 'sent', 'failed', 'refused'));
ALTER TABLE receipts ADD CONSTRAINT receipts_refused_ck CHECK ((state = 'refused') = (refused_reason IS NOT NULL));
CREATE INDEX receipts_refused_idx ON receipts (client_id, id DESC) WHERE state = 'refused';

-- +goose Down
-- Refused receipts become failed ones, their reason in last_error: the state that says
-- "not sent, for good" before this migration.
UPDATE receipts SET state = 'failed', last_error = 'refused: ' || refused_reason WHERE state = 'refused';
DROP INDEX receipts_refused_idx;
ALTER TABLE receipts DROP CONSTRAINT receipts_refused_ck;
ALTER TABLE receipts DROP CONSTRAINT receipts_state_check;
ALTER TABLE receipts ADD CONSTRAINT receipts_state_check CHECK (state IN ('kept', 'queued', 'sent', 'failed'));
ALTER TABLE receipts DROP COLUMN refused_reason;
DROP TABLE receipt_counts;
