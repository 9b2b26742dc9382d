-- The partial index of keys that are not completed, keyed on a condition that the
-- statements writing one key by id never state.
--
-- Those statements (complete, extend or release a lease, take over, hand to an operator)
-- all say `id = $1 ... AND state = 'in_progress'`. With idempotency_keys_open_idx
-- (WHERE state <> 'completed') the state condition matches the index, and when statistics
-- say that hardly any key is in progress, which on a busy server they always do, the
-- planner found the key through that small index rather than the primary key. But the
-- index holds an entry for every key that completed since the last vacuum: each
-- completion read them all, more with every second between vacuums (about 15 entries per
-- completion after 20 s of first-time load, about 60 after 80 s).
--
-- The new index is on the keys without a stored response, which are exactly the keys not
-- completed: the constraint below makes it so (a completed key has a status and a body,
-- any other has neither). Queries for unfinished keys (the completer's work list, the
-- console's state filter) say `response_status IS NULL`; the by-id writes do not, so the
-- primary key is their only way in. checkout/keys_plan_test.go checks both.
--
-- CONCURRENTLY, outside a transaction, as in 00005.

-- +goose NO TRANSACTION

-- +goose Up
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_response_iff_completed
    CHECK ((state = 'completed') = (response_status IS NOT NULL) AND num_nulls(response_status, response_body) <> 1)
    NOT VALID;
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_response_iff_completed;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_response_when_completed;
CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_unanswered_idx ON idempotency_keys (state, created_at DESC)
    WHERE response_status IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_open_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_open_idx ON idempotency_keys (state, created_at DESC)
    WHERE state <> 'completed';
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_unanswered_idx;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_response_when_completed
    CHECK ((state = 'completed') = (response_status IS NOT NULL AND response_body IS NOT NULL));
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_response_iff_completed;
