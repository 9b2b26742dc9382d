package migrations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"
)

// Migration 19: the outbox, as it was made then (migration 48 replaced the dispatch job per
// event with a row of outbox_queue). Events (order.paid, refund.created, ...) are rows of
// outbox_events, written by the statement or transaction that makes the change they
// describe, so that an event exists if and only if its change committed. They leave
// tekrar through River, a job queue on the same Postgres: River's tables are created here,
// and a trigger on outbox_events inserts each event's dispatch job in the same statement,
// so no writer of an event can forget its job and no job exists without its event.
//
// River's schema is applied with River's own migrator, pinned to riverSchemaVersion: a
// newer River whose schema changes needs a new goose migration that moves the pin (and
// redefines outbox_enqueue if River's job table changes), so that the schema of a tekrar
// release is the same wherever it is migrated.
//
// The event's public id is 'evt_' and 32 hex digits of a random UUID, shaped like the
// orders' ids (00013_public_ids.sql); consumers deduplicate on it. Its type is a domain of
// the seven types, so a misspelt type fails the change that emits it. payload is the
// event's data, thin and stable (docs/outbox.md), not a copy of the order.
//
// The dispatch job's unique key is River's own for the job kind outbox_dispatch unique by
// its args ({"event_id": ...}): sha256 of '&kind=outbox_dispatch&args={"event_id":"evt_…"}',
// with River's default unique states (every state but cancelled and discarded). Inserting
// the same job from Go (DispatchArgs) is therefore skipped as a duplicate, which a test in
// checkout/outbox checks against River's own computation.

// riverSchemaVersion is the River schema tekrar runs on (River v0.51.2's newest).
const riverSchemaVersion = 8

const outboxUp = `
CREATE DOMAIN event_public_id AS text CHECK (VALUE ~ '^evt_[0-9a-f]{32}$');
CREATE DOMAIN event_type AS text CHECK (VALUE IN ('order.paid', 'order.declined', 'order.refunded',
    'refund.created', 'order.disputed', 'order.needs_attention', 'compensation.created'));

CREATE TABLE outbox_events (
    id          event_public_id NOT NULL DEFAULT ('evt_' || replace(gen_random_uuid()::text, '-', '')),
    client_id   bigint          NOT NULL REFERENCES clients (id),
    type        event_type      NOT NULL,
    order_id    bigint          REFERENCES orders (id),
    payload     jsonb           NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at  timestamptz     NOT NULL DEFAULT now(),
    CONSTRAINT outbox_events_pk PRIMARY KEY (id)
);
-- The console lists a client's events newest first; an order's page lists its own.
CREATE INDEX outbox_events_client_idx ON outbox_events (client_id, created_at DESC);
CREATE INDEX outbox_events_order_idx ON outbox_events (order_id) WHERE order_id IS NOT NULL;
CREATE INDEX outbox_events_created_idx ON outbox_events (created_at DESC);

-- One dispatch job per event, inserted by the statement that inserts the events (one
-- INSERT ... SELECT per statement, whatever its number of rows).
CREATE FUNCTION outbox_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO river_job (kind, args, queue, max_attempts, priority, state, scheduled_at,
                           unique_key, unique_states)
    SELECT 'outbox_dispatch', jsonb_build_object('event_id', e.id), 'outbox', 25, 1,
           'available', now(),
           sha256(convert_to('&kind=outbox_dispatch&args={"event_id":"' || e.id || '"}', 'UTF8')),
           B'11110101'
      FROM new_events e
    ON CONFLICT (unique_key)
       WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL
         AND river_job_state_in_bitmask(unique_states, state)
    DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_events_enqueue AFTER INSERT ON outbox_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_enqueue();
`

const outboxDown = `
DROP TABLE outbox_events;
DROP FUNCTION outbox_enqueue();
DROP DOMAIN event_type;
DROP DOMAIN event_public_id;
`

func outboxMigration() *goose.Migration {
	m := goose.NewGoMigration(19,
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			if err := migrateRiver(ctx, db, rivermigrate.DirectionUp, riverSchemaVersion); err != nil {
				return err
			}
			return inTx(ctx, db, func(tx *sql.Tx) error {
				var exists bool
				if err := tx.QueryRowContext(ctx, `SELECT to_regclass('outbox_events') IS NOT NULL`).Scan(&exists); err != nil || exists {
					return err // created by an earlier attempt that stopped before goose recorded it
				}
				if _, err := tx.ExecContext(ctx, outboxUp); err != nil {
					return fmt.Errorf("create outbox: %w", err)
				}
				return nil
			})
		}},
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			if err := inTx(ctx, db, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, outboxDown); err != nil {
					return fmt.Errorf("drop outbox: %w", err)
				}
				return nil
			}); err != nil {
				return err
			}
			return migrateRiver(ctx, db, rivermigrate.DirectionDown, -1)
		}},
	)
	// Named like the SQL files, so that `tekrar migrate` lists and reports it as one.
	m.Source = "00019_outbox.go"
	return m
}

// migrateRiver moves River's schema to version (-1 down: no River schema at all). River
// applies each of its versions in a transaction of its own: they cannot share one, since
// version 4 adds a value to an enum that version 6 uses, and Postgres refuses a new enum
// value in the transaction that added it. A start that stops halfway resumes where it
// stopped, River recording each version it applied; goose's session lock keeps two
// replicas from migrating at once.
func migrateRiver(ctx context.Context, db *sql.DB, dir rivermigrate.Direction, version int) error {
	m, err := rivermigrate.New(riverdatabasesql.New(db), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, dir, &rivermigrate.MigrateOpts{TargetVersion: version}); err != nil {
		return fmt.Errorf("river schema %s to %d: %w", dir, version, err)
	}
	return nil
}

func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
