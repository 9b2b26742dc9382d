-- The sandbox provider's notifications, as a real processor sends them: every change to a
-- charge (made, declined, refunded, disputed) writes an event in the same transaction, and
-- a sender delivers each event to the merchant's endpoint, signed, at least once, retried
-- with backoff. Events of one charge are numbered (seq) so that a receiver can apply them
-- in order whatever order they arrive in.
--
-- Written only when the sandbox is configured to send webhooks: without, the charge
-- statement is the one it was, and a first arrival pays nothing for events.

-- +goose Up
CREATE TABLE psp_events (
    id              text          PRIMARY KEY CHECK (id LIKE 'evt\_%'),
    type            text          NOT NULL,
    charge_id       psp_charge_id NOT NULL REFERENCES psp_charges (id),
    seq             integer       NOT NULL CHECK (seq > 0),
    -- The exact bytes every delivery sends, so that a redelivery is the same message.
    body            text          NOT NULL,
    created_at      timestamptz   NOT NULL,
    attempts        integer       NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    delivered_at    timestamptz,
    last_error      text,
    CONSTRAINT psp_events_charge_seq_uq UNIQUE (charge_id, seq),
    CONSTRAINT psp_events_delivery_ck CHECK ((delivered_at IS NULL) = (next_attempt_at IS NOT NULL))
);
CREATE INDEX psp_events_due_idx ON psp_events (next_attempt_at) WHERE delivered_at IS NULL;

CREATE TABLE psp_disputes (
    id         text          PRIMARY KEY CHECK (id LIKE 'dp\_%'),
    charge_id  psp_charge_id NOT NULL REFERENCES psp_charges (id),
    amount     positive_amount NOT NULL,
    reason     text          NOT NULL,
    status     text          NOT NULL CHECK (status IN ('open', 'won', 'lost')),
    created_at timestamptz   NOT NULL,
    closed_at  timestamptz,
    CONSTRAINT psp_disputes_closed_ck CHECK ((status = 'open') = (closed_at IS NULL))
);
CREATE INDEX psp_disputes_charge_idx ON psp_disputes (charge_id);

-- +goose Down
DROP TABLE psp_disputes;
DROP TABLE psp_events;
