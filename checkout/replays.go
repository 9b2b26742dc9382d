package checkout

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// replayCounter counts replays without putting a write on the replay path: counts gather in
// memory and are flushed a few times a second in one transaction that does not wait for a
// synchronous commit. A crash loses at most the last fraction of a second of counts, never a
// key, an order or a response.
type replayCounter struct {
	db     *sqlx.DB
	logger *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	pending map[int64]replayCount

	stop chan struct{}
	done chan struct{}
}

type replayCount struct {
	n    int64
	last time.Time
}

const replayFlushEvery = 200 * time.Millisecond

func newReplayCounter(db *sqlx.DB, logger *slog.Logger, now func() time.Time) *replayCounter {
	c := &replayCounter{
		db: db, logger: logger, now: now,
		pending: make(map[int64]replayCount),
		stop:    make(chan struct{}), done: make(chan struct{}),
	}
	go c.loop()
	return c
}

func (c *replayCounter) add(keyID int64, at time.Time) {
	c.mu.Lock()
	rc := c.pending[keyID]
	rc.n++
	rc.last = at
	c.pending[keyID] = rc
	c.mu.Unlock()
}

func (c *replayCounter) loop() {
	defer close(c.done)
	t := time.NewTicker(replayFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.flush()
		case <-c.stop:
			c.flush()
			return
		}
	}
}

func (c *replayCounter) close() {
	close(c.stop)
	<-c.done
}

// flush writes the gathered counts. On failure they are put back and tried again.
func (c *replayCounter) flush() {
	c.mu.Lock()
	batch := c.pending
	if len(batch) == 0 {
		c.mu.Unlock()
		return
	}
	c.pending = make(map[int64]replayCount)
	c.mu.Unlock()

	ids := make([]int64, 0, len(batch))
	ns := make([]int64, 0, len(batch))
	lasts := make([]string, 0, len(batch))
	for id, rc := range batch {
		ids = append(ids, id)
		ns = append(ns, rc.n)
		lasts = append(lasts, rc.last.UTC().Format(time.RFC3339Nano))
	}
	if err := c.write(ids, ns, lasts); err != nil {
		c.logger.Warn("replay counts not written; will retry", "err", err, "keys", len(ids))
		c.mu.Lock()
		for id, rc := range batch {
			p := c.pending[id]
			p.n += rc.n
			if rc.last.After(p.last) {
				p.last = rc.last
			}
			c.pending[id] = p
		}
		c.mu.Unlock()
	}
}

func (c *replayCounter) write(ids, ns []int64, lasts []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := c.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
		return err
	}
	// Two replicas flushing the same keys can deadlock; the loser's counts go back into
	// pending and are written by its next flush.
	_, err = tx.ExecContext(ctx, `
		UPDATE idempotency_keys k
		   SET replay_count = k.replay_count + v.n,
		       last_replayed_at = greatest(k.last_replayed_at, v.last)
		  FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[]) AS v(id, n, last)
		 WHERE k.id = v.id`, pq.Array(ids), pq.Array(ns), pq.Array(lasts))
	if err != nil {
		return err
	}
	return tx.Commit()
}
