-- Disputes: a cardholder disputes a charge at the provider (a chargeback), and tekrar learns
-- it from the provider's webhooks. The order is marked disputed while the dispute is open, so
-- that an operator sees it and nobody refunds it meanwhile (a refund during a dispute can pay
-- the cardholder twice); once the dispute is decided the order's status follows its refunds
-- again, and the dispute stays on record with its outcome.

-- +goose Up
ALTER DOMAIN order_status DROP CONSTRAINT order_status_check;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_check
    CHECK (VALUE IN ('pending', 'paid', 'partially_refunded', 'refunded', 'disputed', 'declined', 'canceled'));

CREATE TABLE order_disputes (
    id          bigint          GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id    bigint          NOT NULL REFERENCES orders (id),
    provider    text            NOT NULL,
    dispute_id  text            NOT NULL,
    amount      positive_amount NOT NULL,
    reason      text            NOT NULL,
    status      text            NOT NULL CHECK (status IN ('open', 'won', 'lost')),
    opened_at   timestamptz     NOT NULL,
    closed_at   timestamptz,
    CONSTRAINT order_disputes_provider_uq UNIQUE (provider, dispute_id),
    CONSTRAINT order_disputes_closed_ck CHECK ((status = 'open') = (closed_at IS NULL))
);
CREATE INDEX order_disputes_order_idx ON order_disputes (order_id);
CREATE INDEX order_disputes_open_idx ON order_disputes (opened_at) WHERE status = 'open';

-- +goose Down
DROP TABLE order_disputes;
UPDATE orders
   SET status = CASE WHEN refunded_amount >= captured_amount THEN 'refunded'
                     WHEN refunded_amount > 0 THEN 'partially_refunded' ELSE 'paid' END
 WHERE status = 'disputed';
ALTER DOMAIN order_status DROP CONSTRAINT order_status_check;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_check
    CHECK (VALUE IN ('pending', 'paid', 'partially_refunded', 'refunded', 'declined', 'canceled'));
