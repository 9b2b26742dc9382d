-- Settlement counts installment charges. An order paid in installments records its first
-- installment as the order's payment (payments), which settlement counted already; the
-- installments charged later by the scheduled job are recorded only on their installments
-- row (status paid, paid_at), which settlement did not read: their money reached the
-- provider's ledger and no settlement. They become a fifth kind of movement, 'installment',
-- counted in the captured totals on the day tekrar recorded them paid.
--
-- A movement is claimed once by (kind, source_id), a bigint: installments are keyed by
-- (order_id, n), so they get an identity column to name them by. Adding it numbers the
-- existing rows.

-- +goose Up
ALTER TABLE installments ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE installments ADD CONSTRAINT installments_id_uq UNIQUE (id);
ALTER DOMAIN settlement_item_kind DROP CONSTRAINT settlement_item_kind_check;
ALTER DOMAIN settlement_item_kind ADD CONSTRAINT settlement_item_kind_check
    CHECK (VALUE IN ('capture', 'installment', 'refund', 'dispute', 'compensation'));
-- The first installment is the order's payment: only the later ones are movements of
-- their own.
CREATE INDEX installments_settle_idx ON installments (paid_at) WHERE status = 'paid' AND n > 1;

-- +goose Down
DROP INDEX installments_settle_idx;
DELETE FROM settlement_items WHERE kind = 'installment';
ALTER DOMAIN settlement_item_kind DROP CONSTRAINT settlement_item_kind_check;
ALTER DOMAIN settlement_item_kind ADD CONSTRAINT settlement_item_kind_check
    CHECK (VALUE IN ('capture', 'refund', 'dispute', 'compensation'));
ALTER TABLE installments DROP CONSTRAINT installments_id_uq;
ALTER TABLE installments DROP COLUMN id;
