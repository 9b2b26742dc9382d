-- A word when an endpoint is disabled, and the resend of a window (docs/webhooks-out.md).
--
-- clients.contact_email: where tekrar writes to a client's people when one of its webhook
-- endpoints is disabled. One bare mailbox address (checked by checkout/clients before it is
-- stored); NULL: nobody is written to, and the disabling is only logged and counted.
--
-- webhook_deliveries.resent_at: when the client asked for the delivery again by a resend of
-- a window. The retry horizon of a resent delivery runs from then, not from its event's
-- time, which is older than the horizon by the time anyone resends it: a resent delivery
-- gets the whole schedule again. NULL: never resent.

-- +goose Up
ALTER TABLE clients
    ADD COLUMN contact_email text CHECK (length(contact_email) BETWEEN 3 AND 254);
ALTER TABLE webhook_deliveries
    ADD COLUMN resent_at timestamptz;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN resent_at;
ALTER TABLE clients DROP COLUMN contact_email;
