-- Public ids for orders and refunds. Their integer ids come from sequences shared by every
-- client, so a client that saw two of its own ids could count the orders (or refunds) of
-- all other clients made between them. Clients and operators now see only an opaque id,
-- 'ord_' or 'rf_' and 32 hex digits of a random UUID (122 random bits from Postgres's
-- strong random source), which says nothing about the sequence or about other rows. The
-- integer stays the primary key, for joins and foreign keys, and is never shown.
--
-- The id is the column's default, so the statement that creates the row generates it: the
-- claim of an order stays one statement. The rule on its shape is a domain, not a table
-- CHECK, for the reason given in 00010_domains.sql. UNIQUE makes a collision (practically
-- impossible) fail the claim rather than give two orders one id, and is the index that
-- GET /v1/orders/{id} looks an order up by.
--
-- Responses stored before this migration keep the integer ids they were answered with (a
-- replay is byte for byte the first answer); they go with their keys' expiry. Paths of
-- those ids are now 404: a client that kept one looks the order up by its key instead
-- (GET /v1/idempotency-keys/{key} names the public id).
--
-- Adding a column with a volatile default rewrites the table under an exclusive lock,
-- giving each existing row its own id: apply it before the tables are large, or in a
-- quiet hour.

-- +goose Up
CREATE DOMAIN order_public_id AS text CHECK (VALUE ~ '^ord_[0-9a-f]{32}$');
CREATE DOMAIN refund_public_id AS text CHECK (VALUE ~ '^rf_[0-9a-f]{32}$');
ALTER TABLE orders
    ADD COLUMN public_id order_public_id NOT NULL
        DEFAULT ('ord_' || replace(gen_random_uuid()::text, '-', '')),
    ADD CONSTRAINT orders_public_id_uq UNIQUE (public_id);
ALTER TABLE refunds
    ADD COLUMN public_id refund_public_id NOT NULL
        DEFAULT ('rf_' || replace(gen_random_uuid()::text, '-', '')),
    ADD CONSTRAINT refunds_public_id_uq UNIQUE (public_id);

-- +goose Down
ALTER TABLE refunds DROP COLUMN public_id;
ALTER TABLE orders DROP COLUMN public_id;
DROP DOMAIN refund_public_id;
DROP DOMAIN order_public_id;
