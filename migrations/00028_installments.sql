-- Installment plans. An order may be paid in 2 to 12 installments on a card the customer
-- saved at the provider: the first is charged with the order, the others by a scheduled job
-- on their due dates. Each installment is one row keyed by (order_id, n): the primary key is
-- what makes "charge installment n of this order" a thing that exists once, whoever runs
-- the job and however often. Its attempt number names the provider key the charge is made
-- under (derived from order, n and attempt), so a rerun or a second replica asks the
-- provider under the same key, which charges at most once per key. lease_token fences the
-- recording of an outcome: a process that froze past its lease writes nothing on waking.
--
-- An order's captured amount now grows installment by installment, so its CHECK allows any
-- amount up to the total for an order with installments, and stays all-or-nothing for the
-- others.
--
-- The sandbox provider keeps the cards its customers saved (psp_payment_methods), as real
-- providers do: a charge names a customer and one of its payment methods instead of a
-- single-use token. Like the rest of the sandbox's ledger, nothing in checkout joins it.

-- +goose Up
ALTER TABLE orders
    ADD COLUMN installments     smallint NOT NULL DEFAULT 1 CHECK (installments BETWEEN 1 AND 12),
    ADD COLUMN payment_customer text,
    ADD COLUMN payment_method   text,
    ADD CONSTRAINT orders_installments_saved_card CHECK (installments = 1 OR payment_method IS NOT NULL);
ALTER TABLE orders DROP CONSTRAINT orders_check;
ALTER TABLE orders ADD CONSTRAINT orders_captured_amount_check CHECK (
    captured_amount IN (0, amount) OR (installments > 1 AND captured_amount BETWEEN 0 AND amount));

CREATE TABLE installments (
    order_id           bigint      NOT NULL REFERENCES orders (id),
    n                  smallint    NOT NULL CHECK (n BETWEEN 1 AND 12),
    amount             bigint      NOT NULL CHECK (amount > 0),
    -- The due date is a day in the client's time zone; due_at is when that day starts there.
    due_on             date        NOT NULL,
    due_at             timestamptz NOT NULL,
    -- scheduled: to be charged at next_attempt_at; paid; attention: declined on every
    -- attempt of the retry schedule, an operator's to resolve; canceled: the order was
    -- refunded or declined before it was charged.
    status             text        NOT NULL DEFAULT 'scheduled'
                                   CHECK (status IN ('scheduled', 'paid', 'attention', 'canceled')),
    -- attempts: how many attempts were started; in_flight: attempt number `attempts` was
    -- claimed and its outcome is not recorded yet (a rerun looks its charge up first).
    attempts           int         NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 100),
    in_flight          boolean     NOT NULL DEFAULT false,
    next_attempt_at    timestamptz,
    lease_token        bigint      NOT NULL DEFAULT 0,
    lease_expires_at   timestamptz,
    provider_key       text        UNIQUE,
    provider_charge_id text        UNIQUE,
    decline_code       text,
    paid_at            timestamptz,
    updated_at         timestamptz NOT NULL,
    PRIMARY KEY (order_id, n),
    CONSTRAINT installments_paid_has_charge
        CHECK ((status = 'paid') = (provider_charge_id IS NOT NULL AND paid_at IS NOT NULL)),
    CONSTRAINT installments_scheduled_has_next CHECK ((status = 'scheduled') = (next_attempt_at IS NOT NULL))
);
CREATE INDEX installments_due_idx ON installments (next_attempt_at) WHERE status = 'scheduled';

CREATE TABLE psp_payment_methods (
    id          text        PRIMARY KEY CHECK (id LIKE 'pm\_%'),
    customer    text        NOT NULL CHECK (length(customer) BETWEEN 1 AND 255),
    -- What the card does when charged: approve (decline_code '') or decline with the code.
    -- The token it was saved from is never stored.
    card_brand  text        NOT NULL DEFAULT '',
    card_last4  text        NOT NULL DEFAULT '' CHECK (card_last4 ~ '^([0-9]{4})?$'),
    decline_code text       NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX psp_payment_methods_customer_idx ON psp_payment_methods (customer);

-- +goose Down
DROP TABLE psp_payment_methods;
DROP TABLE installments;
ALTER TABLE orders DROP CONSTRAINT orders_captured_amount_check;
ALTER TABLE orders ADD CONSTRAINT orders_check CHECK (captured_amount IN (0, amount));
ALTER TABLE orders DROP CONSTRAINT orders_installments_saved_card;
ALTER TABLE orders DROP COLUMN payment_method, DROP COLUMN payment_customer, DROP COLUMN installments;
