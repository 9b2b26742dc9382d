-- Sign-in throttling counted atomically. Reading a count of login_failures before checking
-- a password let 20 concurrent wrong passwords all be checked: none of them had been
-- recorded yet. A sign-in now takes a slot in each of its counters, one row per (scope,
-- subject), with an upsert that returns the new count, before its password is checked; the
-- row lock makes concurrent attempts count one after the other. Scopes: 'email', 'address'
-- (the client address the console records) and 'pair' (the two together). login_failures
-- stays the record of failed sign-ins.

-- +goose Up
CREATE TABLE login_throttle (
    scope        text        NOT NULL CHECK (scope IN ('email', 'address', 'pair')),
    subject      text        NOT NULL,
    window_start timestamptz NOT NULL,
    -- Failed attempts in the window, plus attempts whose password is being checked.
    attempts     integer     NOT NULL CHECK (attempts >= 0),
    PRIMARY KEY (scope, subject)
);
CREATE INDEX login_throttle_window_idx ON login_throttle (window_start);

-- +goose Down
DROP TABLE login_throttle;
