package main

// The statements of floor mode (floor.go): design.sql's, with its pgbench variables as
// parameters, each a whole statement a reader can run by hand.
const (
	// floorSchemaSQL is the ceiling's schema.sql, made idempotent: on the ceiling's own
	// database, where the tables exist, it changes nothing.
	floorSchemaSQL = `
CREATE TABLE IF NOT EXISTS idempotency_keys (
    id             bigserial   PRIMARY KEY,
    scope          text        NOT NULL,
    key            text        NOT NULL,
    request_hash   bytea       NOT NULL,
    status         text        NOT NULL DEFAULT 'in_progress',
    response_code  int,
    response_body  jsonb,
    locked_at      timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL DEFAULT now() + interval '24 hours',
    CONSTRAINT idempotency_keys_scope_key_uq UNIQUE (scope, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
CREATE TABLE IF NOT EXISTS orders (
    id            bigserial   PRIMARY KEY,
    scope         text        NOT NULL,
    amount_minor  bigint      NOT NULL,
    currency      text        NOT NULL,
    status        text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS payments (
    id            bigserial   PRIMARY KEY,
    order_id      bigint      NOT NULL REFERENCES orders (id),
    charge_id     text        NOT NULL,
    amount_minor  bigint      NOT NULL,
    status        text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS psp_charges (
    id            bigserial   PRIMARY KEY,
    provider_key  text        NOT NULL,
    amount_minor  bigint      NOT NULL,
    currency      text        NOT NULL,
    status        text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT psp_charges_provider_key_uq UNIQUE (provider_key)
)`

	// floorLookupSQL is the look-up tekrar makes before it claims: a known key is answered
	// from its row.
	floorLookupSQL = `SELECT status, response_code, response_body, request_hash FROM idempotency_keys WHERE scope = $1 AND key = $2`

	// Commit 1: claim the key and create the order. No row from the claim: another request
	// holds the key.
	floorClaimSQL = `
INSERT INTO idempotency_keys (scope, key, request_hash, status, locked_at, expires_at)
VALUES ($1, $2, $3, 'in_progress', now(), now() + interval '24 hours')
ON CONFLICT (scope, key) DO NOTHING
RETURNING id`
	floorOrderSQL = `INSERT INTO orders (scope, amount_minor, currency, status) VALUES ($1, $2, $3, 'pending') RETURNING id`

	// Commit 2, in autocommit: the provider's ledger, under a key derived from the key row.
	floorChargeSQL = `
INSERT INTO psp_charges (provider_key, amount_minor, currency, status)
VALUES ('tekrar-' || $1::text, $2, $3, 'succeeded')
ON CONFLICT (provider_key) DO NOTHING
RETURNING id`

	// Commit 3: the payment, the order paid, the key completed with its response. The
	// completion returns the stored body, so that the first answer is the bytes a replay
	// sends (jsonb's own text form), not a Go encoding of the same object.
	floorPaymentSQL  = `INSERT INTO payments (order_id, charge_id, amount_minor, status) VALUES ($1, 'ch_' || $2::text, $3, 'succeeded')`
	floorPaidSQL     = `UPDATE orders SET status = 'paid' WHERE id = $1`
	floorCompleteSQL = `
UPDATE idempotency_keys
   SET status = 'completed',
       response_code = 201,
       response_body = jsonb_build_object('order_id', $2::bigint,
                                          'status', 'paid'::text,
                                          'amount_minor', $3::bigint,
                                          'currency', $4::text),
       locked_at = NULL
 WHERE id = $1
RETURNING response_body`
)
