-- The console's operator actions (admin/actions.go) and their audit log (admin/audit.go).
--
-- Every action form carries a random nonce, made when its confirmation page was rendered.
-- An action on a target is recorded once per nonce: a form posted twice (a double click, a
-- resubmit after a lost answer) adds no second row, and the unique constraint decides it, so
-- that two concurrent posts of one form cannot both write. The nonce is unique with the
-- action and the target, not alone: a nonce replayed against another target is a new action
-- and must get its own row, never be swallowed as a duplicate. Rows without a form have no
-- nonce; NULLs do not collide.
--
-- audit_log is small and written only by operators, so plain (locking) index builds are fine.

-- +goose Up
ALTER TABLE audit_log ADD COLUMN nonce text CHECK (length(nonce) BETWEEN 1 AND 100);
ALTER TABLE audit_log ADD CONSTRAINT audit_log_nonce_uq UNIQUE (nonce, action, target);

-- The audit page lists entries newest first, a page at a time, with the keyset (at, id).
DROP INDEX audit_log_at_idx;
CREATE INDEX audit_log_at_id_idx ON audit_log (at DESC, id DESC);

-- A key's page and an order's page show the actions taken on them.
CREATE INDEX audit_log_target_idx ON audit_log (target, at DESC, id DESC);

-- +goose Down
DROP INDEX audit_log_target_idx;
DROP INDEX audit_log_at_id_idx;
CREATE INDEX audit_log_at_idx ON audit_log (at DESC);
ALTER TABLE audit_log DROP CONSTRAINT audit_log_nonce_uq;
ALTER TABLE audit_log DROP COLUMN nonce;
