-- Products, stock and carts. A product is one client's sku with a name, a price and a stock
-- level; an order line marked from_stock takes its quantity from the product in the very
-- statement that claims the order's key, so a replay never takes it twice and a storm on the
-- last unit sells it once. stock >= 0 is a CHECK: whatever a statement gets wrong, the
-- database refuses a negative level. version is bumped by every change (a PUT, a sale, a
-- restock) and is the product's ETag, so a PUT with a stale If-Match cannot undo a sale.
--
-- stock_movements is the ledger of every change of a level, written in the transaction of
-- the change: the sale (its order), the restock of a refund (its refund and order), a PUT.
-- The console lists it per product; the sum of a product's deltas is its level.
--
-- Carts are a client's named drafts of an order's items (the id is the client's, like an
-- idempotency key), replaced whole by PUT with the same version/ETag rule.
--
-- refuse_short_stock is how the claim statement fails as a whole when a line could not be
-- taken from stock: a statement cannot roll back its own inserts but it can raise, and an
-- error rolls the whole statement back. SQLSTATE TK001 tells the caller it was stock.

-- +goose Up
CREATE TABLE products (
    id          bigint        GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id   bigint        NOT NULL REFERENCES clients (id),
    sku         text          NOT NULL CHECK (length(sku) BETWEEN 1 AND 64),
    name        text          NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    price       bigint        NOT NULL CHECK (price >= 0),
    currency    currency_code NOT NULL,
    stock       bigint        NOT NULL,
    version     bigint        NOT NULL DEFAULT 1,
    created_at  timestamptz   NOT NULL,
    updated_at  timestamptz   NOT NULL,
    CONSTRAINT products_client_sku_uq UNIQUE (client_id, sku),
    CONSTRAINT products_stock_not_negative CHECK (stock >= 0)
);

CREATE TABLE stock_movements (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    product_id  bigint      NOT NULL REFERENCES products (id),
    delta       bigint      NOT NULL,
    reason      text        NOT NULL CHECK (reason IN ('put', 'sale', 'refund', 'adjust')),
    order_id    bigint      REFERENCES orders (id),
    refund_id   bigint      REFERENCES refunds (id),
    created_at  timestamptz NOT NULL,
    CONSTRAINT stock_movements_cause_ck CHECK (CASE reason
        WHEN 'sale'   THEN order_id IS NOT NULL AND refund_id IS NULL
        WHEN 'refund' THEN order_id IS NOT NULL AND refund_id IS NOT NULL
        ELSE order_id IS NULL AND refund_id IS NULL END)
);
CREATE INDEX stock_movements_product_idx ON stock_movements (product_id, id DESC);
CREATE INDEX stock_movements_order_idx ON stock_movements (order_id) WHERE order_id IS NOT NULL;

CREATE TABLE carts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id   bigint      NOT NULL REFERENCES clients (id),
    public_id   text        NOT NULL CHECK (length(public_id) BETWEEN 1 AND 255),
    items       jsonb       NOT NULL,
    version     bigint      NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT carts_client_public_id_uq UNIQUE (client_id, public_id)
);

-- +goose StatementBegin
CREATE FUNCTION refuse_short_stock(short bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF short > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'TK001', MESSAGE = 'out of stock';
    END IF;
    RETURN true;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION refuse_short_stock(bigint);
DROP TABLE carts;
DROP TABLE stock_movements;
DROP TABLE products;
