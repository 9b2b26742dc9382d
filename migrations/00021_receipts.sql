-- Receipts: the e-mail a customer gets when their order is paid or refunded. One row per
-- outbox event (event_id UNIQUE): the handler that renders a receipt runs inside the event's
-- dispatch transaction and may run again after a crash, and ON CONFLICT (event_id) DO NOTHING
-- makes the second run a no-op instead of a second receipt. The event is named by its public
-- id (evt_...), as text, not a foreign key, so that receipts outlive the outbox's retention.
--
-- The rendered subject and bodies are stored, not re-rendered at send time: what the console
-- shows is byte for byte what was (or would be) sent, and a retry after a crash sends the same
-- message with the same Message-ID, so that the customer's mail client recognises a resend.
--
-- state: 'kept' when no SMTP server is configured (the dev default: the receipt waits on the
-- console, it is not dropped), 'queued' while a send job owns it (attempts and last_error say
-- how it is going), 'sent' once the SMTP server accepted it, 'failed' when the job gave up.

-- +goose Up
CREATE TABLE receipts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    text        NOT NULL,
    order_id    bigint      NOT NULL REFERENCES orders (id),
    client_id   bigint      NOT NULL REFERENCES clients (id),
    refund_id   bigint      REFERENCES refunds (id),
    kind        text        NOT NULL CHECK (kind IN ('paid', 'refunded')),
    recipient   text        NOT NULL CHECK (recipient <> ''),
    subject     text        NOT NULL,
    message_id  text        NOT NULL,
    body_text   text        NOT NULL,
    body_html   text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('kept', 'queued', 'sent', 'failed')),
    attempts    int         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error  text,
    created_at  timestamptz NOT NULL,
    sent_at     timestamptz,
    CONSTRAINT receipts_event_uq UNIQUE (event_id),
    CONSTRAINT receipts_message_id_uq UNIQUE (message_id),
    CONSTRAINT receipts_sent_ck CHECK ((state = 'sent') = (sent_at IS NOT NULL))
);
CREATE INDEX receipts_order_idx ON receipts (order_id);
CREATE INDEX receipts_client_idx ON receipts (client_id, id DESC);

-- +goose Down
DROP TABLE receipts;
