-- Provider keys derived from the intent, not from the row (docs/recovery.md, "Provider
-- keys").
--
-- The key tekrar sends the provider for a charge, refund or cancel was derived from the
-- key row's id and created_at, and an installment's from its order's id and created_at. A
-- claim row lost while its charge stands at the provider (a restore from a backup, a
-- failover under asynchronous replication) made the client's retry claim a new row, send a
-- new provider key, and be charged again. Keys claimed from now on derive every provider
-- key from the intent: the client, the client's Idempotency-Key and what the request is
-- (its scope fingerprint, or its exact fingerprint on a route that has none). A retry after
-- the loss sends the key the first attempt sent, and meets the provider's first charge.
--
--   idempotency_keys.intent  SHA-256 of that intent (checkout.intentOf), written by the
--                            claim; the charge, refund and cancel keys of the row derive
--                            from it and the step.
--   orders.intent            the same digest, copied from the key row that created the
--                            order: its installment keys derive from it, long after the
--                            key row was swept.
--
-- NULL, too, in a row whose claim found a payment, refund or compensation of tekrar's already
-- under the intent's provider key: a forgotten key reused for the same request, which is a
-- new intent and derives its keys from its row (checkout.orderIntentSQL).
--
-- NULL in every row written before: such a row keeps the old derivation until it ends, so
-- a charge already made under an old key is still found by the completer, a retry and
-- reconciliation. Nullable columns with no default rewrite nothing.
--
-- Down refuses to run while an unfinished key or a still running installment plan carries
-- an intent: the previous schema would derive the old key for it, miss the charge already
-- made under the intent's, and charge again. Let them finish (or end them) first.

-- +goose Up
ALTER TABLE idempotency_keys ADD COLUMN intent sha256_digest;
ALTER TABLE orders ADD COLUMN intent sha256_digest;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM idempotency_keys WHERE intent IS NOT NULL AND state <> 'completed')
       OR EXISTS (SELECT 1 FROM orders o JOIN installments i ON i.order_id = o.id
                   WHERE o.intent IS NOT NULL AND i.status = 'scheduled') THEN
        RAISE EXCEPTION 'unfinished keys or installment plans derive their provider keys from their intent: let them end before migrating below 35';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE orders DROP COLUMN intent;
ALTER TABLE idempotency_keys DROP COLUMN intent;
