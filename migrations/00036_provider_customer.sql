-- The provider customer an order's saved card is charged with (docs/security.md).
--
-- A client names a saved card by its own customer id and the method id; one provider account
-- holds every client's customers, so tekrar sends the provider a customer id that names the
-- client too ("cl_<client id>_<customer>", checkout.ProviderCustomer), and a client can never
-- name another client's customer. The order keeps what it was charged with: the job charges
-- a plan's later installments with the same customer its first was charged with.
--
-- Orders stored before were charged with the client's customer id as it was sent: they keep
-- it (the cards behind their plans were saved under it), and so do their installments.

-- +goose Up
ALTER TABLE orders
    ADD COLUMN provider_customer text CHECK (length(provider_customer) BETWEEN 1 AND 255);
UPDATE orders SET provider_customer = payment_customer WHERE payment_customer IS NOT NULL;
ALTER TABLE orders
    ADD CONSTRAINT orders_provider_customer_saved_card CHECK ((provider_customer IS NULL) = (payment_customer IS NULL));

-- +goose Down
ALTER TABLE orders DROP CONSTRAINT orders_provider_customer_saved_card;
ALTER TABLE orders DROP COLUMN provider_customer;
