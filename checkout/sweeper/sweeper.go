package sweeper

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jmoiron/sqlx"
)

// The defaults of Config's fields, for a field left zero.
const (
	// BatchDefault is Config.Batch's default.
	BatchDefault = 1000
	// SettleDefault is Config.Settle's default.
	SettleDefault = time.Minute
	// EventRetentionDefault is Config.EventRetention's default: 30 days.
	EventRetentionDefault = 30 * 24 * time.Hour
)

// Config tunes the sweeper; the zero value of a field takes its default.
type Config struct {
	// Observe, when not nil, is told every pass and its error (metrics). A pass whose
	// context was canceled is not told.
	Observe func(Result, error)
	// Batch is how many rows one statement touches: small enough that no batch holds its
	// row locks for long or makes checkout wait. Default BatchDefault (1,000).
	Batch int
	// Pause between batches, so that a pass over a large backlog leaves the database room
	// for checkout traffic. The sweeper rests at least this long, and at least as long as
	// the batch before took: it never spends more than about half its time in statements,
	// and on a busy database, where its batches run slower, it backs off by as much.
	// Zero or less: no pause at all (the default; the server's setting is 10ms).
	Pause time.Duration
	// Settle is how long a key lives on next to its new tombstone before the row is deleted.
	// A claim statement that started before the tombstone existed could otherwise insert
	// a fresh key the instant the old row goes; claims are bounded far below this.
	// Default SettleDefault (1 minute).
	Settle time.Duration
	// EventRetention is how long key events are kept. Default EventRetentionDefault (30 days).
	EventRetention time.Duration
	// Now is the clock of Pass; tests inject one. Default time.Now.
	Now func() time.Time
}

// withDefaults fills the fields left zero with their defaults.
func (c Config) withDefaults() Config {
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	c.Settle = cmp.Or(c.Settle, SettleDefault)
	c.EventRetention = cmp.Or(c.EventRetention, EventRetentionDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// mustValidate panics on a setting no pass can run with. The server's settings are bounded
// when they are read (internal/config), so this is a programming error, caught at start.
func (c Config) mustValidate() Config {
	switch {
	case c.Batch < 1:
		panic(fmt.Sprintf("sweeper: Batch %d, want at least 1", c.Batch))
	case c.Settle < 0:
		panic(fmt.Sprintf("sweeper: Settle %s, want zero (the default) or more", c.Settle))
	case c.EventRetention < 0:
		panic(fmt.Sprintf("sweeper: EventRetention %s, want zero (the default) or more", c.EventRetention))
	}
	return c
}

// Result is what one pass did.
type Result struct {
	KeysTombstoned      int64
	KeysDeleted         int64
	TombstonesForgotten int64
	EventsDeleted       int64
	Batches             int
	Took                time.Duration
}

// String says what the pass did, for its run record and `tekrar sweep`.
func (r Result) String() string {
	return fmt.Sprintf("tombstoned %d keys, deleted %d, forgot %d tombstones, deleted %d events in %d batches (%s)",
		r.KeysTombstoned, r.KeysDeleted, r.TombstonesForgotten, r.EventsDeleted, r.Batches, r.Took.Round(time.Millisecond))
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
	cfg    Config
	logger *slog.Logger
	node   string
}

// New returns a sweeper over db. It panics on a Config no pass can run with (a negative
// Batch, Settle or EventRetention).
func New(db *sqlx.DB, cfg Config, logger *slog.Logger) *Sweeper {
	host, _ := os.Hostname()
	return &Sweeper{db: db, cfg: cfg.withDefaults().mustValidate(), logger: logger,
		node: fmt.Sprintf("%s/%d", host, os.Getpid())}
}

// Pass runs one sweep as of the sweeper's clock.
func (s *Sweeper) Pass(ctx context.Context) (Result, error) { return s.PassAt(ctx, s.cfg.Now()) }

// PassAt runs one sweep as of now: the scheduled time of the tick that runs it. It takes no
// lock: two passes at once would count, and record, the same keys twice. Serve runs it as
// the scheduled task "sweep" and `tekrar sweep` through the same task, whose lock lets one
// pass run at a time (internal/schedule).
func (s *Sweeper) PassAt(ctx context.Context, now time.Time) (Result, error) {
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

func (s *Sweeper) passAt(ctx context.Context, now time.Time) (Result, error) {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("sweep: %w", err)
	}
	defer conn.Close()
	started := time.Now()
	var res Result
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
	_, err = conn.ExecContext(context.WithoutCancel(ctx), recordSweepSQL,
		now, now.Add(res.Took), s.node, res.KeysTombstoned, res.KeysDeleted, res.TombstonesForgotten,
		res.EventsDeleted, res.Batches, errText)
	return res, errors.Join(runErr, err)
}

// tombstone walks the expired completed keys in (expires_at, id) order with a cursor, so
// that a backlog of a million keys costs one pass over the index, not one per batch.
func (s *Sweeper) tombstone(ctx context.Context, conn *sqlx.Conn, now time.Time, res *Result) error {
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
// Config.Pause). It returns early, with the context's error, when ctx ends.
func (s *Sweeper) pause(ctx context.Context, took time.Duration) error {
	if s.cfg.Pause <= 0 {
		return nil
	}
	t := time.NewTimer(max(s.cfg.Pause, took))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
