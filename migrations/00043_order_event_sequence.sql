-- Every event about an order carries the order's sequence ("sequence" in its data): 1 for
-- its first event, one more for each later one, in the order their transactions commit
-- (docs/webhooks-out.md, "Ordering"). A receiver keeps the highest it has seen per order and
-- knows a late event for an older one.
--
-- orders.event_seq is the last sequence given. next_event_sequence, which outbox.InsertSQL
-- calls for each event row it inserts, adds one to it under the order's row lock, which the
-- transaction holds until it commits: two transactions writing events of one order wait for
-- each other, so sequences follow the commit order, a rollback gives its number back, and
-- two events of one statement get two numbers, in the statement's order. An UPDATE, not a
-- sequence object: a sequence's numbers are given out of commit order and lost on rollback.
--
-- Existing orders start at 0: their next event is 1, and their earlier events carry none.
--
-- It is a function because outbox.InsertSQL is spliced into other statements as one
-- data-modifying CTE and cannot add a CTE of its own. It is called in the INSERT's select
-- list, once per row inserted, not from a CTE that nothing reads (which Postgres would
-- skip). VOLATILE, so that each call runs on a fresh snapshot and sees the order's row as the
-- calling statement left it: a statement that updates the order's row must do so upstream of
-- its new_events (every one does: new_events reads the update's RETURNING), or the later
-- UPDATE would meet a row this function updated already.

-- +goose Up
ALTER TABLE orders ADD COLUMN event_seq bigint NOT NULL DEFAULT 0 CHECK (event_seq >= 0);

-- +goose StatementBegin
CREATE FUNCTION next_event_sequence(order_id bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    UPDATE orders SET event_seq = event_seq + 1 WHERE id = $1 RETURNING event_seq
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION next_event_sequence(bigint);
ALTER TABLE orders DROP COLUMN event_seq;
