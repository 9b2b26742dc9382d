-- The sandbox's key-less mode (checkout/psp, SandboxOptions.KeyLess) plays a processor that
-- deduplicates nothing, as iyzico documents its services: a charge sent twice is two charges,
-- and a charge whose answer was lost is found by the merchant's reference (its description,
-- as iyzico's conversationId), not by a key. Its charges still carry the key tekrar sent, but
-- as a reference only: several charges may hold one key.
--
-- keyed says which a row is. The key stays UNIQUE among keyed rows (a partial unique index,
-- which ON CONFLICT (key) WHERE keyed infers), so the default mode is exactly what it was:
-- one charge, or one canceled key, per key, whatever the concurrency. Every existing row is
-- keyed. Key-less rows are found by description, through their own partial index.

-- +goose Up
ALTER TABLE psp_charges ADD COLUMN keyed boolean NOT NULL DEFAULT true;
-- A canceled key is a fence, which only a keyed charge has.
ALTER TABLE psp_charges ADD CONSTRAINT psp_charges_keyless_ck CHECK (keyed OR status <> 'canceled');
CREATE UNIQUE INDEX psp_charges_key_keyed_uq ON psp_charges (key) WHERE keyed;
ALTER TABLE psp_charges DROP CONSTRAINT psp_charges_key_uq;
CREATE INDEX psp_charges_reference_idx ON psp_charges (description, created_at, seq) WHERE NOT keyed;

-- +goose Down
-- Fails while two key-less charges share a key: such a ledger has no keyed form.
DROP INDEX psp_charges_reference_idx;
ALTER TABLE psp_charges ADD CONSTRAINT psp_charges_key_uq UNIQUE (key);
DROP INDEX psp_charges_key_keyed_uq;
ALTER TABLE psp_charges DROP CONSTRAINT psp_charges_keyless_ck, DROP COLUMN keyed;
