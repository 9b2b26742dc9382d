-- A compensation of a disputed charge is held, not refunded.
--
-- Reconciliation owes the refund of a charge no order owns (an orphan). If the cardholder
-- disputes that charge at their bank, refunding it while the dispute is open can pay them
-- twice: once by the refund, once more if the bank decides the dispute for them. tekrar
-- already refuses to refund a disputed order for that reason; a compensation of a disputed
-- charge is held the same way, in state 'disputed': not settled (settled_at NULL), looked at
-- again on its schedule, shown to operators. Once the provider says the dispute is decided,
-- it goes on: won, the money stayed with the merchant and what the provider has not refunded
-- of the charge is refunded ('refunded', or 'already_refunded'); lost, the bank gave the
-- disputed amount back to the cardholder, and only what remains beyond it is refunded, or,
-- when nothing does, the compensation settles as 'dispute_lost' with no refund.
-- +goose Up
ALTER DOMAIN compensation_state DROP CONSTRAINT compensation_state_check;
ALTER DOMAIN compensation_state ADD CONSTRAINT compensation_state_check
    CHECK (VALUE IN ('watching', 'disputed', 'refunded', 'no_charge', 'already_refunded', 'dispute_lost'));
ALTER TABLE compensations
    DROP CONSTRAINT compensations_settled_ck,
    ADD CONSTRAINT compensations_settled_ck CHECK (
        (state IN ('watching', 'disputed')) = (settled_at IS NULL)
        AND (state = 'refunded') = (refund_id IS NOT NULL)
        AND (refund_id IS NULL OR (charge_id IS NOT NULL AND amount IS NOT NULL AND currency IS NOT NULL))
        AND (order_id IS NULL) = (client_id IS NULL)
        AND (order_id IS NOT NULL OR source = 'reconcile'));
DROP INDEX compensations_due_idx;
CREATE INDEX compensations_due_idx ON compensations (next_attempt_at) WHERE state IN ('watching', 'disputed');

-- +goose Down
UPDATE compensations SET state = 'watching' WHERE state = 'disputed';
UPDATE compensations SET state = 'no_charge' WHERE state = 'dispute_lost';
DROP INDEX compensations_due_idx;
CREATE INDEX compensations_due_idx ON compensations (next_attempt_at) WHERE state = 'watching';
ALTER TABLE compensations
    DROP CONSTRAINT compensations_settled_ck,
    ADD CONSTRAINT compensations_settled_ck CHECK (
        (state = 'watching') = (settled_at IS NULL)
        AND (state = 'refunded') = (refund_id IS NOT NULL)
        AND (refund_id IS NULL OR (charge_id IS NOT NULL AND amount IS NOT NULL AND currency IS NOT NULL))
        AND (order_id IS NULL) = (client_id IS NULL)
        AND (order_id IS NOT NULL OR source = 'reconcile'));
ALTER DOMAIN compensation_state DROP CONSTRAINT compensation_state_check;
ALTER DOMAIN compensation_state ADD CONSTRAINT compensation_state_check
    CHECK (VALUE IN ('watching', 'refunded', 'no_charge', 'already_refunded'));
