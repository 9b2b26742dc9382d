-- The operator console's searches (checkout/queries*.go): "I was charged twice". Measured
-- with the queries at 10 million keys; checkout/queries_plan_test.go checks their plans.
--
-- No index on idempotency_keys: every one would be written by each claim and again by each
-- completion (which changes the indexed state, so it is never a HOT update). The console's
-- key searches make do with the indexes of 00002 and 00004: (client_id, key), order_id,
-- refund_id, (client_id, created_at), (expires_at, id) and the partial open-keys index.
-- Searches without a client probe the (client_id, ...) indexes once per client.
--
-- The indexes below are on tables whose writes are cheaper to burden:
--   - orders: its completion and refund updates change status, captured_amount,
--     refunded_amount and updated_at, none of them indexed (not even in a partial index's
--     predicate), so those updates stay HOT and touch no index; only the claim's insert
--     pays for these;
--   - key_events: written asynchronously, in batches, off the request path;
--   - key_tombstones: written by the sweeper only.
--
-- CONCURRENTLY, outside a transaction, so that building them on a live database does not
-- block checkout's inserts. If a build fails, drop the INVALID index it leaves and rerun.

-- +goose NO TRANSACTION

-- +goose Up
-- The complaint search by time window and the double-tap detector's first orders: a
-- client's orders newest first (keyset on created_at, id); all clients merge one range per
-- client.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_client_created_idx ON orders (client_id, created_at, id);

-- The complaint search by amount ("charged 49.90 twice yesterday"), and the double-tap
-- detector's probe for the same amount a few seconds after an order (with id, so that the
-- probe starts after the order itself instead of fetching it again).
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_client_amount_idx ON orders (client_id, amount, created_at, id);

-- Customer email search is exact but case-insensitive, and emails are stored as sent: the
-- index is on lower(email). It replaces the partial index on the raw column, which no query
-- used. Not partial: the planner only uses the statistics of a full expression index, and
-- without them it guesses 0.5% of all orders for one email (51,000 at 10 million), which
-- at that scale costs a plan enough to get it JIT-compiled (130 ms for a 1 ms search).
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_customer_email_lower_idx ON orders (lower(customer_email));
DROP INDEX CONCURRENTLY IF EXISTS orders_customer_email_idx;

-- Events of some kinds of one client over a time range, newest first, and their counts
-- (index-only). It replaces key_events_client_at_idx (client_id, at): a client's events of
-- every kind are read as one range per kind and merged, so key_events keeps four indexes.
CREATE INDEX CONCURRENTLY IF NOT EXISTS key_events_client_kind_at_idx ON key_events (client_id, kind, at);
DROP INDEX CONCURRENTLY IF EXISTS key_events_client_at_idx;

-- The key of a refund once swept: only refund keys' tombstones have a refund_id.
CREATE INDEX CONCURRENTLY IF NOT EXISTS key_tombstones_refund_idx ON key_tombstones (refund_id)
    WHERE refund_id IS NOT NULL;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS key_events_client_at_idx ON key_events (client_id, at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_customer_email_idx ON orders (customer_email)
    WHERE customer_email IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS key_tombstones_refund_idx;
DROP INDEX CONCURRENTLY IF EXISTS key_events_client_kind_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_customer_email_lower_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_client_amount_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_client_created_idx;
