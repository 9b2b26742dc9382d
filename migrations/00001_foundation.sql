-- Foundation: the API clients that authenticate to /v1 and the operators of the console.

-- +goose Up
-- A client is an app or a POS fleet. Its API secret is a 256-bit random token, so a SHA-256
-- digest is a safe way to store it (a slow password hash buys nothing for a token that cannot
-- be guessed) and lets authentication look it up by equality.
CREATE TABLE clients (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    secret_hash   bytea       NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    -- How long an idempotency key is honoured after its first arrival.
    key_ttl       interval    NOT NULL DEFAULT interval '24 hours'
                              CHECK (key_ttl BETWEEN interval '1 minute' AND interval '90 days'),
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);

-- An operator logs in to the console. Passwords are bcrypt hashes.
CREATE TABLE operators (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text        NOT NULL CHECK (email = lower(email) AND email LIKE '%_@_%'),
    password_hash text        NOT NULL,
    role          text        NOT NULL DEFAULT 'viewer' CHECK (role IN ('viewer', 'admin')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT operators_email_uq UNIQUE (email)
);

-- +goose Down
DROP TABLE operators;
DROP TABLE clients;
