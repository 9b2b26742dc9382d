-- What a route's fingerprint covers beyond the exact body (docs/fingerprints.md).
--
-- fingerprint keeps its definition (SHA-256 of the method, the path and the canonical body,
-- card token included): every key stored before this migration keeps matching its retries,
-- and a replay stays one comparison with no provider call. Two columns are added beside it,
-- read only when the exact fingerprint differs:
--
--   scope_fingerprint  the request as its route's spec covers it: the body without the card
--                      token (and without the members the spec excludes), with what it names
--                      by reference (a cart's items). Its hash input names the spec's
--                      version, so a spec change cannot make old and new values collide.
--   card_fingerprint   the card's identity at the payment provider (Stripe's
--                      card.fingerprint), which a new single-use token of the same card
--                      shares.
--
-- Both are NULL in rows written before, for routes whose spec covers the exact body, and
-- (card_fingerprint) when the provider did not know the token: such a key recognises only
-- its exact fingerprint, the behaviour it always had. Nullable columns with no default
-- rewrite nothing. They are domains, not table CHECKs, for the reason 00010 gives. The
-- tombstone keeps them too, so that a late retry with a new token of the same card is still
-- told it is the same purchase.

-- +goose Up
CREATE DOMAIN card_fingerprint AS text CHECK (length(VALUE) BETWEEN 1 AND 255);
ALTER TABLE idempotency_keys
    ADD COLUMN scope_fingerprint sha256_digest,
    ADD COLUMN card_fingerprint  card_fingerprint;
ALTER TABLE key_tombstones
    ADD COLUMN scope_fingerprint sha256_digest,
    ADD COLUMN card_fingerprint  card_fingerprint;

-- +goose Down
ALTER TABLE key_tombstones DROP COLUMN scope_fingerprint, DROP COLUMN card_fingerprint;
ALTER TABLE idempotency_keys DROP COLUMN scope_fingerprint, DROP COLUMN card_fingerprint;
DROP DOMAIN card_fingerprint;
