-- next_event_sequence (00043) as PL/pgSQL, the same UPDATE under the same row lock. Postgres
-- 15 parses and plans the body of an SQL function that cannot be inlined (an UPDATE cannot)
-- at every execution of the statement that calls it: once per order's completion, the
-- statement every first arrival ends with. PL/pgSQL plans its UPDATE once per connection
-- and keeps the plan. VOLATILE as before: each call runs on a fresh snapshot and sees the
-- order's row as the calling statement left it.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION next_event_sequence(order_id bigint) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    seq bigint;
BEGIN
    UPDATE orders SET event_seq = event_seq + 1 WHERE id = $1 RETURNING event_seq INTO seq;
    RETURN seq;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION next_event_sequence(order_id bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    UPDATE orders SET event_seq = event_seq + 1 WHERE id = $1 RETURNING event_seq
$$;
-- +goose StatementEnd
