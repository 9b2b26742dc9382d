-- A lease per delivery attempt in flight (checkout/deliveries, lease.go): a delivery job
-- takes one before it sends and deletes it after, so that a client's attempts in flight
-- across every process are counted under the client's advisory lock, and one client's slow or
-- dead endpoints cannot hold every delivery worker. A lease expires on its own
-- (expires_at), so that the slot of a killed process frees itself. Rows live seconds: no
-- history is kept here (the attempts are in webhook_attempts).
--
-- webhook_attempt_waiters: the River jobs that found no free slot and snoozed, oldest first;
-- an attempt that ends wakes the oldest that may run now (woken_at holds its slot for it
-- a moment), so that a waiting job runs when a slot frees rather than when it next looks.

-- +goose Up
CREATE TABLE webhook_attempt_leases (
    id          bigserial   PRIMARY KEY,
    client_id   bigint      NOT NULL,
    endpoint_id bigint      NOT NULL REFERENCES webhook_endpoints (id),
    delivery_id bigint      NOT NULL,
    started_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CONSTRAINT webhook_attempt_leases_expiry_ck CHECK (expires_at > started_at)
);
CREATE INDEX webhook_attempt_leases_client_idx ON webhook_attempt_leases (client_id, endpoint_id);

CREATE TABLE webhook_attempt_waiters (
    job_id      bigint      PRIMARY KEY,
    client_id   bigint      NOT NULL,
    endpoint_id bigint      NOT NULL REFERENCES webhook_endpoints (id),
    since       timestamptz NOT NULL,
    woken_at    timestamptz
);
CREATE INDEX webhook_attempt_waiters_client_idx ON webhook_attempt_waiters (client_id, since, job_id);

-- A client's deliveries never attempted, counted at each fan-out (deliveries.FanOut): those
-- queued beyond the client's share are queued waiting.
CREATE INDEX webhook_deliveries_unattempted_idx ON webhook_deliveries (endpoint_id) WHERE state = 'pending' AND attempts = 0;

-- +goose Down
DROP INDEX webhook_deliveries_unattempted_idx;
DROP TABLE webhook_attempt_waiters;
DROP TABLE webhook_attempt_leases;
