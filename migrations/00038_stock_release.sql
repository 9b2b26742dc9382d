-- Stock is held only by sales that end sold. An order takes its from_stock lines when its
-- key is claimed, before the card is charged; an order that then ends unsold (declined by
-- the card, or canceled: given up with nothing charged) gives back what it took, in the
-- statement that records that end (checkout/stock.go, releaseStockSQL). The give-back is
-- a movement of its own, 'release', which names the order like a sale does, so that a
-- product's movements still add up to its level and the console links it to its order.
--
-- The two CHECKs of stock_movements are dropped and added again with 'release' in them,
-- under the names Postgres gave them; existing rows all pass.
--
-- Down refuses to run while a release movement exists, rather than deleting it: the
-- movements are the ledger of the levels, and without them a product's movements would no
-- longer add up to its level. Delete them by hand (and correct the levels) first if that is
-- really meant.

-- +goose Up
ALTER TABLE stock_movements DROP CONSTRAINT stock_movements_reason_check;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_reason_check
    CHECK (reason IN ('put', 'sale', 'refund', 'adjust', 'release'));
ALTER TABLE stock_movements DROP CONSTRAINT stock_movements_cause_ck;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_cause_ck CHECK (CASE reason
    WHEN 'sale'    THEN order_id IS NOT NULL AND refund_id IS NULL
    WHEN 'release' THEN order_id IS NOT NULL AND refund_id IS NULL
    WHEN 'refund'  THEN order_id IS NOT NULL AND refund_id IS NOT NULL
    ELSE order_id IS NULL AND refund_id IS NULL END);

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM stock_movements WHERE reason = 'release') THEN
        RAISE EXCEPTION 'release movements exist: delete them before migrating below 38';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE stock_movements DROP CONSTRAINT stock_movements_cause_ck;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_cause_ck CHECK (CASE reason
    WHEN 'sale'   THEN order_id IS NOT NULL AND refund_id IS NULL
    WHEN 'refund' THEN order_id IS NOT NULL AND refund_id IS NOT NULL
    ELSE order_id IS NULL AND refund_id IS NULL END);
ALTER TABLE stock_movements DROP CONSTRAINT stock_movements_reason_check;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_reason_check
    CHECK (reason IN ('put', 'sale', 'refund', 'adjust'));
