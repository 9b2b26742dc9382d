-- The provider customer of a saved card names its client by a value of the client's own,
-- not by the client's id. tekrar names a client's customer to the provider as
-- <prefix><customer> (checkout/customers.go), and the client's backend saves its customers'
-- cards at the provider under that name. Until now the prefix was 'cl_<client id>_': a
-- sequence value, which a failover that loses the last commits, or a restore from a backup,
-- hands to the next client created; that client's customers would then name, at the
-- provider, the cards the lost client's backend saved there (docs/recovery.md, "What the
-- provider is told").
--
-- A new client's prefix is 'cl_' and 24 hex digits of a random UUID (96 random bits), chosen
-- by the statement that creates the client, so it is never reused after a lost commit: the
-- column's default. An existing client keeps 'cl_<id>_', under which its backend has already
-- saved cards; its row exists on every timeline that could reuse its id, so the id is now a
-- stored value, not one derived again. UNIQUE makes a collision fail the creation.
-- Adding a column with a volatile default rewrites the table; clients is small.

-- +goose Up
ALTER TABLE clients
    ADD COLUMN provider_customer_prefix text NOT NULL
        DEFAULT ('cl_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 24) || '_')
        CHECK (provider_customer_prefix ~ '^cl_[0-9a-f]{1,24}_$'),
    ADD CONSTRAINT clients_provider_customer_prefix_uq UNIQUE (provider_customer_prefix);
UPDATE clients SET provider_customer_prefix = 'cl_' || id || '_';

-- +goose Down
ALTER TABLE clients DROP COLUMN provider_customer_prefix;
