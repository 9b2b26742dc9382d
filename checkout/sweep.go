package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jmoiron/sqlx"
)

// SweepConfig tunes the sweeper; the zero value of a field takes its default.
type SweepConfig struct {
	// Observe, when not nil, is told every pass of Run and its error (metrics).
	Observe func(SweepResult, error)
	// Batch is how many rows one statement touches: small enough that no batch holds its
	// row locks for long or makes checkout wait.
	Batch int
	// Pause between batches, so that a pass over a large backlog leaves the database room
	// for checkout traffic. The sweeper rests at least this long, and at least as long as
	// the batch before took: it never spends more than about half its time in statements,
	// and on a busy database, where its batches run slower, it backs off by as much.
	// Zero or less: no pause at all.
	Pause time.Duration
	// Settle is how long a key lives on next to its new tombstone before the row is deleted.
	// A claim statement that started before the tombstone existed could otherwise insert
	// a fresh key the instant the old row goes; claims are bounded far below this.
	Settle time.Duration
	// EventRetention is how long key events are kept.
	EventRetention time.Duration
	// Now is the clock; tests inject one.
	Now func() time.Time
}

func (c SweepConfig) withDefaults() SweepConfig {
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Settle == 0 {
		c.Settle = time.Minute
	}
	if c.EventRetention == 0 {
		c.EventRetention = 30 * 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// String says what the pass did, for its run record and `tekrar sweep`.
func (r SweepResult) String() string {
	return fmt.Sprintf("tombstoned %d keys, deleted %d, forgot %d tombstones, deleted %d events in %d batches (%s)",
		r.KeysTombstoned, r.KeysDeleted, r.TombstonesForgotten, r.EventsDeleted, r.Batches, r.Took.Round(time.Millisecond))
}

// SweepResult is what one pass did.
type SweepResult struct {
	KeysTombstoned      int64
	KeysDeleted         int64
	TombstonesForgotten int64
	EventsDeleted       int64
	Batches             int
	Took                time.Duration
}

// Sweeper expires keys. Serve runs it as the scheduled task "sweep": one process of the
// deployment per tick, one pass at a time (internal/schedule).
//
// A pass, in batches, each its own short transaction:
//  1. tombstone: for each completed key past expires_at, write a tombstone (the key stays);
//  2. delete: remove the key rows whose tombstone is older than Settle, and record an
//     expired event for each;
//  3. forget: delete tombstones past their grace period, after which a key is new again;
//  4. delete key events older than EventRetention.
//
// Keys in progress or needing attention are never expired: they are work not yet done.
type Sweeper struct {
	db     *sqlx.DB
	cfg    SweepConfig
	logger *slog.Logger
	node   string
}

// NewSweeper returns a sweeper over db.
func NewSweeper(db *sqlx.DB, cfg SweepConfig, logger *slog.Logger) *Sweeper {
	host, _ := os.Hostname()
	return &Sweeper{db: db, cfg: cfg.withDefaults(), logger: logger, node: fmt.Sprintf("%s/%d", host, os.Getpid())}
}

// Pass runs one sweep as of the sweeper's clock.
func (s *Sweeper) Pass(ctx context.Context) (SweepResult, error) { return s.PassAt(ctx, s.cfg.Now()) }

// PassAt runs one sweep as of now: the scheduled time of the tick that runs it. It takes no
// lock: two passes at once would count, and record, the same keys twice. Serve runs it as
// the scheduled task "sweep" and `tekrar sweep` through the same task, whose lock lets one
// pass run at a time (internal/schedule).
func (s *Sweeper) PassAt(ctx context.Context, now time.Time) (SweepResult, error) {
	res, err := s.passAt(ctx, now)
	if s.cfg.Observe != nil && ctx.Err() == nil {
		s.cfg.Observe(res, err)
	}
	// The log line the sweep loop wrote before it became a scheduled task: a pass that
	// changed something says what, whoever ran it (a tick, or `tekrar sweep`).
	if err == nil && res.KeysDeleted+res.KeysTombstoned+res.TombstonesForgotten+res.EventsDeleted > 0 {
		s.logger.Info("sweep", "tombstoned", res.KeysTombstoned, "deleted", res.KeysDeleted,
			"forgotten", res.TombstonesForgotten, "events_deleted", res.EventsDeleted, "took", res.Took.String())
	}
	return res, err
}

func (s *Sweeper) passAt(ctx context.Context, now time.Time) (SweepResult, error) {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	defer conn.Close()
	started := time.Now()
	var res SweepResult
	runErr := s.tombstone(ctx, conn, now, &res)
	batches := []struct {
		n     *int64
		query string
		args  []any
	}{
		{&res.KeysDeleted, deleteBatchSQL, []any{now, now.Add(-s.cfg.Settle), s.cfg.Batch}},
		{&res.TombstonesForgotten, forgetBatchSQL, []any{now, s.cfg.Batch}},
		{&res.EventsDeleted, eventsBatchSQL, []any{now.Add(-s.cfg.EventRetention), s.cfg.Batch}},
	}
	for _, st := range batches {
		for runErr == nil {
			var n int64
			t0 := time.Now()
			if runErr = conn.GetContext(ctx, &n, st.query, st.args...); runErr != nil {
				break
			}
			res.Batches++
			*st.n += n
			if n < int64(s.cfg.Batch) {
				break
			}
			runErr = s.pause(ctx, time.Since(t0))
		}
	}
	res.Took = time.Since(started)
	var errText sql.NullString
	if runErr != nil {
		errText = sql.NullString{String: runErr.Error(), Valid: true}
	}
	_, err = recordSweepSQL.exec(context.WithoutCancel(ctx), conn, sweepRecord{
		StartedAt: now, FinishedAt: now.Add(res.Took), Node: s.node, KeysTombstoned: res.KeysTombstoned,
		KeysDeleted: res.KeysDeleted, TombstonesForgotten: res.TombstonesForgotten, EventsDeleted: res.EventsDeleted,
		Batches: res.Batches, Error: errText})
	return res, errors.Join(runErr, err)
}

// sweepRecord is a row of sweeps: what one pass did, for operators.
type sweepRecord struct {
	StartedAt           time.Time      `db:"started_at"`
	FinishedAt          time.Time      `db:"finished_at"`
	Node                string         `db:"node"`
	KeysTombstoned      int64          `db:"keys_tombstoned"`
	KeysDeleted         int64          `db:"keys_deleted"`
	TombstonesForgotten int64          `db:"tombstones_forgotten"`
	EventsDeleted       int64          `db:"events_deleted"`
	Batches             int            `db:"batches"`
	Error               sql.NullString `db:"error"`
}

var recordSweepSQL = named[sweepRecord](`
	INSERT INTO sweeps (started_at, finished_at, node, keys_tombstoned, keys_deleted,
	                    tombstones_forgotten, events_deleted, batches, error)
	VALUES (:started_at, :finished_at, :node, :keys_tombstoned, :keys_deleted,
	        :tombstones_forgotten, :events_deleted, :batches, :error)`)

// tombstone walks the expired completed keys in (expires_at, id) order with a cursor, so
// that a backlog of a million keys costs one pass over the index, not one per batch.
func (s *Sweeper) tombstone(ctx context.Context, conn *sqlx.Conn, now time.Time, res *SweepResult) error {
	after := struct {
		At time.Time `db:"at"`
		ID int64     `db:"id"`
	}{At: time.Time{}, ID: 0}
	for {
		var b struct {
			N  int64         `db:"n"`
			At sql.NullTime  `db:"at"`
			ID sql.NullInt64 `db:"id"`
		}
		t0 := time.Now()
		if err := conn.GetContext(ctx, &b, tombstoneBatchSQL, now, s.cfg.Batch, after.At, after.ID); err != nil {
			return fmt.Errorf("sweep: tombstone: %w", err)
		}
		res.Batches++
		res.KeysTombstoned += b.N
		if !b.At.Valid || !b.ID.Valid {
			return nil // no expired key left after the cursor
		}
		after.At, after.ID = b.At.Time, b.ID.Int64
		if err := s.pause(ctx, time.Since(t0)); err != nil {
			return err
		}
	}
}

// pause rests after a batch that took took: Pause, or took if that is longer (see
// SweepConfig.Pause).
func (s *Sweeper) pause(ctx context.Context, took time.Duration) error {
	if s.cfg.Pause <= 0 {
		return nil
	}
	return sleep(ctx, max(s.cfg.Pause, took))
}

// tombstoneBatchSQL writes tombstones for up to $2 completed keys expired at $1 (KeyExpired's
// rule: expires_at <= $1), after the cursor ($3, $4), in the order of the (expires_at, id)
// index. It answers how many it wrote and the cursor for the next batch (null when it found
// none). A key whose tombstone is already written waits for the delete step and is skipped.
// An older tombstone of the same client and key (a key forgotten after its grace and used
// again) is replaced.
const tombstoneBatchSQL = `
	WITH batch AS (
	    SELECT k.id, k.client_id, k.key, k.fingerprint, k.method, k.path, k.order_id, k.refund_id,
	           k.created_at, k.expires_at, k.scope_fingerprint, k.card_fingerprint
	      FROM idempotency_keys k
	     WHERE k.expires_at <= $1 AND (k.expires_at, k.id) > ($3, $4) AND k.state = 'completed'
	       AND NOT EXISTS (SELECT 1 FROM key_tombstones t WHERE t.key_id = k.id)
	     ORDER BY k.expires_at, k.id
	     LIMIT $2
	), ins AS (
	    INSERT INTO key_tombstones (client_id, key, key_id, fingerprint, method, path, order_id,
	                                refund_id, first_seen, expired_at, forget_at, created_at,
	                                scope_fingerprint, card_fingerprint)
	    SELECT b.client_id, b.key, b.id, b.fingerprint, b.method, b.path, b.order_id, b.refund_id,
	           b.created_at, b.expires_at, b.expires_at + c.tombstone_grace, $1,
	           b.scope_fingerprint, b.card_fingerprint
	      FROM batch b JOIN clients c ON c.id = b.client_id
	    ON CONFLICT (client_id, key) DO UPDATE
	       SET key_id = excluded.key_id, fingerprint = excluded.fingerprint, method = excluded.method,
	           path = excluded.path, order_id = excluded.order_id, refund_id = excluded.refund_id,
	           first_seen = excluded.first_seen, expired_at = excluded.expired_at,
	           forget_at = excluded.forget_at, created_at = excluded.created_at,
	           scope_fingerprint = excluded.scope_fingerprint, card_fingerprint = excluded.card_fingerprint
	    RETURNING 1
	), last AS (
	    SELECT expires_at, id FROM batch ORDER BY expires_at DESC, id DESC LIMIT 1
	)
	SELECT (SELECT count(*) FROM ins) AS n, (SELECT expires_at FROM last) AS at, (SELECT id FROM last) AS id`

// deleteBatchSQL deletes up to $3 key rows whose tombstones were written before $2, and
// records an expired event for each. The tombstone lets go of the row id either way (the
// row may have gone by another path).
//
// The batch is passed on as one array of ids, not joined as a relation: "id = ANY(array)"
// is always a probe of the primary key and of the key_id index, whatever the statistics
// say. As a join, the planner estimated its way into a hash join over a sequential scan of
// every tombstone (settled ones included) for each batch once key_tombstones held some
// tens of thousands of rows.
const deleteBatchSQL = `
	WITH batch AS (
	    SELECT array_agg(key_id) AS ids FROM (
	        SELECT key_id FROM key_tombstones
	         WHERE key_id IS NOT NULL AND created_at <= $2
	         ORDER BY created_at
	         LIMIT $3) b
	), gone AS (
	    DELETE FROM idempotency_keys k
	     WHERE k.id = ANY ((SELECT ids FROM batch)::bigint[])
	    RETURNING k.id, k.client_id, k.key, k.expires_at, k.order_id, k.refund_id
	), released AS (
	    UPDATE key_tombstones t SET key_id = NULL
	     WHERE t.key_id = ANY ((SELECT ids FROM batch)::bigint[]) AND t.key_id IS NOT NULL
	), ev AS (
	    INSERT INTO key_events (at, client_id, key, key_id, kind, detail)
	    SELECT $1, g.client_id, g.key, g.id, 'expired',
	           jsonb_strip_nulls(jsonb_build_object('expired_at', g.expires_at,
	               'order_id', (SELECT o.public_id FROM orders o WHERE o.id = g.order_id),
	               'refund_id', (SELECT r.public_id FROM refunds r WHERE r.id = g.refund_id)))
	      FROM gone g
	)
	SELECT coalesce(cardinality(ids), 0) FROM batch`

// forgetBatchSQL deletes up to $2 tombstones whose grace ended by $1.
const forgetBatchSQL = `
	WITH gone AS (
	    DELETE FROM key_tombstones
	     WHERE (client_id, key) IN (
	           SELECT client_id, key FROM key_tombstones
	            WHERE forget_at <= $1 AND key_id IS NULL
	            ORDER BY forget_at
	            LIMIT $2)
	    RETURNING 1
	)
	SELECT count(*) FROM gone`

// eventsBatchSQL deletes up to $2 key events older than $1. Ids grow with time, so the
// oldest events are at the start of the primary key.
const eventsBatchSQL = `
	WITH gone AS (
	    DELETE FROM key_events
	     WHERE id IN (SELECT id FROM key_events WHERE at < $1 ORDER BY id LIMIT $2)
	    RETURNING 1
	)
	SELECT count(*) FROM gone`
