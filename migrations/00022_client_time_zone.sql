-- A client's time zone: where its business day starts and ends. Scheduled work that is keyed
-- by a day (an installment's due date, a nightly settlement) reads the day in the client's
-- zone, not the server's, so that a shop in Istanbul closes its day at 21:00 UTC. The name is
-- an IANA zone (Europe/Istanbul); the application checks it loads, because Postgres accepts
-- abbreviations and POSIX strings that Go does not.

-- +goose Up
ALTER TABLE clients ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC'
    CHECK (length(time_zone) BETWEEN 1 AND 64);

-- +goose Down
ALTER TABLE clients DROP COLUMN time_zone;
