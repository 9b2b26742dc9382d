-- The console's own state: operator sessions (in Postgres, so that any replica serves any
-- operator), failed logins for throttling, and the audit log of operator actions.

-- +goose Up
CREATE TABLE operator_sessions (
    -- SHA-256 of the session cookie's value: a stolen table does not log anyone in.
    token_hash   bytea       PRIMARY KEY CHECK (length(token_hash) = 32),
    operator_id  bigint      NOT NULL REFERENCES operators (id) ON DELETE CASCADE,
    csrf_token   text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    user_agent   text,
    remote_addr  text
);
CREATE INDEX operator_sessions_expires_idx ON operator_sessions (expires_at);

CREATE TABLE login_failures (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email       text        NOT NULL,
    remote_addr text,
    at          timestamptz NOT NULL
);
CREATE INDEX login_failures_email_at_idx ON login_failures (email, at);

CREATE TABLE audit_log (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL,
    operator_id bigint      NOT NULL REFERENCES operators (id),
    action      text        NOT NULL,
    target      text        NOT NULL,
    detail      jsonb
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE login_failures;
DROP TABLE operator_sessions;
