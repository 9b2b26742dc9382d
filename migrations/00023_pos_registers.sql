-- Registers and their offline sales. A register is a till of a client, named by the client's
-- own id (like a cart's); it is created by the first batch that names it, and the name is
-- the latest one a batch sent. A sale of a register is an ordinary order (orders,
-- idempotency_keys: one key per sale, scoped to the client), and pos_sales holds only what
-- a register adds to it: which register sold it, when it happened at the till (sold_at,
-- the till's clock) as opposed to when tekrar received it (received_at), and how many
-- units it sold beyond the stock tekrar knew of (oversold_units). An offline sale has
-- already happened, so it is never refused for stock: the level stops at 0 (the CHECK on
-- products stays) and the shortfall is recorded here, not as a negative level; a product's
-- movements still add up to its level.
--
-- pos_batch_arrivals is one row per batch a register sent (a resend is another row with the
-- same batch_key), with what became of its sales: the console's resend statistics count
-- duplicates absorbed from it without scanning keys. It is written when the batch is
-- answered; a batch cut off half way leaves no row, its sales are counted by the resend.
--
-- No foreign key from pos_sales to products: a sale's products are in its order's items.

-- +goose Up
CREATE TABLE registers (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id   bigint      NOT NULL REFERENCES clients (id),
    public_id   text        NOT NULL CHECK (length(public_id) BETWEEN 1 AND 255),
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT registers_client_public_id_uq UNIQUE (client_id, public_id)
);

CREATE TABLE pos_sales (
    order_id        bigint      PRIMARY KEY REFERENCES orders (id),
    register_id     bigint      NOT NULL REFERENCES registers (id),
    sold_at         timestamptz NOT NULL,
    received_at     timestamptz NOT NULL,
    oversold_units  bigint      NOT NULL DEFAULT 0 CHECK (oversold_units >= 0)
);
CREATE INDEX pos_sales_register_idx ON pos_sales (register_id, order_id DESC);

CREATE TABLE pos_batch_arrivals (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    register_id  bigint      NOT NULL REFERENCES registers (id),
    batch_key    text        NOT NULL CHECK (length(batch_key) BETWEEN 1 AND 255),
    sales        int         NOT NULL CHECK (sales >= 0),
    created      int         NOT NULL CHECK (created >= 0),
    replayed     int         NOT NULL CHECK (replayed >= 0),
    refused      int         NOT NULL CHECK (refused >= 0),
    received_at  timestamptz NOT NULL
);
CREATE INDEX pos_batch_arrivals_register_idx ON pos_batch_arrivals (register_id, batch_key);

-- +goose Down
DROP TABLE pos_batch_arrivals;
DROP TABLE pos_sales;
DROP TABLE registers;
