-- Scheduled work (internal/schedule): one row per execution of a task, so that an operator
-- can see when each tick ran, which process ran it and what it did.
--
-- A row is written when a run starts and completed when it ends: a run whose process died
-- half way keeps finished_at and outcome NULL, which is how the console shows it as
-- unfinished. A turn skipped because the task's previous run still held its lock is
-- written finished at once, as 'skipped'. A retried tick (a task with MaxAttempts > 1) is a
-- new row with the same scheduled_for and the next attempt: rows are executions, not ticks,
-- so nothing here is unique by tick; River's unique jobs keep a tick from being inserted
-- twice.
--
-- Retention is bounded per task: the statement that writes a run deletes the task's rows
-- older than its newest thousand, through (task, id).
-- +goose Up
CREATE TABLE schedule_runs (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task          text        NOT NULL CHECK (task ~ '^[a-z][a-z0-9_]{0,39}$'),
    scheduled_for timestamptz NOT NULL,
    trigger       text        NOT NULL CHECK (trigger IN ('schedule', 'hand')),
    job_id        bigint,
    attempt       int         NOT NULL CHECK (attempt >= 1),
    process       text        NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at   timestamptz,
    outcome       text        CHECK (outcome IN ('ok', 'failed', 'skipped')),
    summary       text        NOT NULL DEFAULT '',
    error         text,
    CONSTRAINT schedule_runs_finished_ck CHECK ((finished_at IS NULL) = (outcome IS NULL)),
    CONSTRAINT schedule_runs_job_ck CHECK ((trigger = 'schedule') = (job_id IS NOT NULL))
);
CREATE INDEX schedule_runs_task_idx ON schedule_runs (task, id DESC);

-- +goose Down
DROP TABLE schedule_runs;
