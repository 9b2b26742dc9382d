-- The console's one search box (checkout/report/search.go) and the inbox's search. Each kind
-- of id the box takes is found through an index; these are the ones that were missing:
--
--   - a customer by the start of an e-mail or of the client's customer id, case-insensitive
--     ("ayse@", "AYSE"): LIKE 'prefix%' reads a btree only under text_pattern_ops (or the C
--     collation), whatever the database's collation is. The equality index on
--     lower(customer_email) of 00005 stays, for the complaint search's exact e-mail;
--   - the inbox narrowed to one event type, newest first;
--   - the registers' oversold sales, newest first: a partial index, of the few sales that
--     sold beyond the stock only.
--
-- The orders indexes are paid by the claim's insert only (as 00005 says, updates of an order
-- change no indexed column); the inbox's by each provider event's insert.
--
-- CONCURRENTLY, outside a transaction, so that building them on a live database does not
-- block inserts. If a build fails, drop the INVALID index it leaves and rerun.

-- +goose NO TRANSACTION

-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_customer_email_prefix_idx
    ON orders (lower(customer_email) text_pattern_ops);
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_customer_id_prefix_idx
    ON orders (lower(customer_id) text_pattern_ops);
CREATE INDEX CONCURRENTLY IF NOT EXISTS provider_events_type_idx ON provider_events (type, received_at DESC);
CREATE INDEX CONCURRENTLY IF NOT EXISTS pos_sales_oversold_idx ON pos_sales (order_id DESC) WHERE oversold_units > 0;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS pos_sales_oversold_idx;
DROP INDEX CONCURRENTLY IF EXISTS provider_events_type_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_customer_id_prefix_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_customer_email_prefix_idx;
