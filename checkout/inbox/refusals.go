package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pgtext"
)

// Refusal reasons of the provider inbox: the only words a refused delivery leaves in the
// database (provider_inbox_refusals), besides a count and the sender's truncated address.
const (
	RefusalBadSignature     = "bad_signature"     // no signature matches a configured key
	RefusalStale            = "stale"             // the timestamp is older than the tolerance
	RefusalFuture           = "future"            // the timestamp is further ahead than the tolerance
	RefusalMalformedHeaders = "malformed_headers" // a webhook-* header is missing or unreadable
	RefusalIDMismatch       = "id_mismatch"       // signed under another id than the event's
	RefusalApplyFailed      = "apply_failed"      // verified, but applying it failed: rolled back, to be redelivered
)

// refusalsKept is how long the minute counters of refusals are kept: the upsert that counts
// deletes older ones, so the table stays bounded whatever the rate of refusals.
const refusalsKept = 7 * 24 * time.Hour

// maxRefusalRemote bounds the address kept with a bucket.
const maxRefusalRemote = 64

// CountRefusal counts one refused (or failed) delivery under reason, in the current
// minute's bucket, and remembers remote as the bucket's newest sender. Nothing of the
// delivery itself is stored.
//
// The count is kept in memory and written by the inbox's own writer (refusalLog), every
// Config.RefusalFlush, as one upsert per bucket and reason (refusalTally). A storm of
// forged deliveries therefore takes no database connection per delivery and never queues
// on the bucket's row, and every refusal is counted exactly; a process killed loses at
// most the counts of its last RefusalFlush (a tenth of a second by default), which the
// console's figures can afford.
func (s *Inbox) CountRefusal(reason, remote string) {
	if len(remote) > maxRefusalRemote {
		remote = remote[:maxRefusalRemote]
	}
	if !pgtext.Valid(remote) {
		remote = "?"
	}
	s.refusalLog.refusals.add(s.cfg.Now().UTC(), reason, remote)
}

// refusalTally is the refusals counted since the last write, by bucket and reason.
type refusalTally struct {
	mu      sync.Mutex
	pending map[refusalBucket]*refusalCount
}

type refusalBucket struct {
	bucket time.Time // the minute
	reason string
}

type refusalCount struct {
	n          int64
	lastAt     time.Time
	lastRemote string
}

func (r *refusalTally) add(now time.Time, reason, remote string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[refusalBucket]*refusalCount{}
	}
	k := refusalBucket{now.Truncate(time.Minute), reason}
	c := r.pending[k]
	if c == nil {
		c = &refusalCount{}
		r.pending[k] = c
	}
	c.n++
	if !now.Before(c.lastAt) {
		c.lastAt, c.lastRemote = now, remote
	}
}

// take empties the tally and returns what it held.
func (r *refusalTally) take() map[refusalBucket]*refusalCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pending
	r.pending = nil
	return out
}

// countRefusalsSQL adds $3 refusals to the bucket of minute $1 and reason $2, whose newest
// was at $4 from $6, and deletes the buckets older than $5: the table stays bounded
// whatever the rate of refusals. Two processes adding to one bucket add up: the increment
// is done by the upsert on the row, not read and written back.
const countRefusalsSQL = `
	WITH old AS (
	    DELETE FROM provider_inbox_refusals WHERE bucket < $5
	)
	INSERT INTO provider_inbox_refusals AS r (bucket, reason, count, last_at, last_remote)
	VALUES ($1, $2, $3, $4, $6)
	ON CONFLICT (bucket, reason) DO UPDATE
	   SET count = r.count + excluded.count,
	       last_at = greatest(r.last_at, excluded.last_at),
	       last_remote = CASE WHEN excluded.last_at >= r.last_at THEN excluded.last_remote ELSE r.last_remote END`

// writeRefusals writes the tally's counts; the counts of a bucket that could not be written
// after a few tries are dropped and logged.
func (l *refusalLog) writeRefusals() {
	for k, c := range l.refusals.take() {
		var err error
		for attempt := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = l.db.ExecContext(ctx, countRefusalsSQL, k.bucket, k.reason, c.n, c.lastAt, k.bucket.Add(-refusalsKept), c.lastRemote)
			cancel()
			if err == nil || !tdb.IsUnavailable(err) {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
		if err != nil {
			l.logger.Warn("provider webhook refusals not counted", "err", fmt.Errorf("count inbox refusals: %w", err),
				"reason", k.reason, "refusals", c.n)
		}
	}
}

// refusalLog writes the tally's counts in the background, every Config.RefusalFlush, so
// that counting a refusal never waits on the database (CountRefusal).
type refusalLog struct {
	db       *sqlx.DB
	logger   *slog.Logger
	refusals refusalTally
	flushes  chan chan struct{}
	stop     chan struct{}
	done     sync.WaitGroup
}

func newRefusalLog(db *sqlx.DB, logger *slog.Logger, every time.Duration) *refusalLog {
	l := &refusalLog{db: db, logger: logger, flushes: make(chan chan struct{}), stop: make(chan struct{})}
	l.done.Add(1)
	go l.loop(every)
	return l
}

func (l *refusalLog) loop(every time.Duration) {
	defer l.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.writeRefusals()
		case done := <-l.flushes:
			l.writeRefusals()
			close(done)
		case <-l.stop:
			l.writeRefusals()
			return
		}
	}
}

// flush writes every refusal counted before the call.
func (l *refusalLog) flush() {
	done := make(chan struct{})
	l.flushes <- done
	<-done
}

// close writes what is left and stops the writer.
func (l *refusalLog) close() {
	close(l.stop)
	l.done.Wait()
}
