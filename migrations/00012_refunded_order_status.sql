-- An order's status follows its refunds: partially_refunded once a refund of part of its
-- capture is finished, refunded once refunds cover the whole capture. Before, a refunded
-- order still said "paid" in the console and in GET /v1/orders/{id}, and operators took it
-- for one still to refund.
--
-- The refund's completion sets the status, in the statement that marks the refund
-- succeeded (completeRefund). A partially refunded order can be refunded further, like a
-- paid one.
--
-- Existing orders get the status their finished refunds give them.

-- +goose Up
ALTER DOMAIN order_status DROP CONSTRAINT order_status_check;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_check
    CHECK (VALUE IN ('pending', 'paid', 'partially_refunded', 'refunded', 'declined', 'canceled'));

UPDATE orders o
   SET status = CASE WHEN o.refunded_amount >= o.captured_amount THEN 'refunded' ELSE 'partially_refunded' END
 WHERE o.status = 'paid'
   AND EXISTS (SELECT 1 FROM refunds r WHERE r.order_id = o.id AND r.status = 'succeeded');

-- +goose Down
UPDATE orders SET status = 'paid' WHERE status IN ('partially_refunded', 'refunded');
ALTER DOMAIN order_status DROP CONSTRAINT order_status_check;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_check
    CHECK (VALUE IN ('pending', 'paid', 'declined', 'canceled'));
