-- A compensation may find that nothing is owed any more.
--
-- A compensation refunds what tekrar owes of a charge: the charge's amount less what the
-- provider has already refunded of it, by any key (an operator's refund at the provider's
-- dashboard, an earlier refund of tekrar's). When the provider has already refunded the
-- whole charge by the time the compensation looks, no refund is made and none is tekrar's to
-- name, so such a row cannot settle as 'refunded' (which requires refund_id). It settles as
-- 'already_refunded': settled_at set, the charge named, no refund, no amount. The state is
-- the record of why nothing was refunded; the settlement rules of compensations_settled_ck
-- (00018) need no change.
-- +goose Up
ALTER DOMAIN compensation_state DROP CONSTRAINT compensation_state_check;
ALTER DOMAIN compensation_state ADD CONSTRAINT compensation_state_check
    CHECK (VALUE IN ('watching', 'refunded', 'no_charge', 'already_refunded'));

-- +goose Down
UPDATE compensations SET state = 'no_charge' WHERE state = 'already_refunded';
ALTER DOMAIN compensation_state DROP CONSTRAINT compensation_state_check;
ALTER DOMAIN compensation_state ADD CONSTRAINT compensation_state_check
    CHECK (VALUE IN ('watching', 'refunded', 'no_charge'));
