package keyed

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pgtext"
)

// Entry kinds: what a keyed request did with its key, or what the sweeper did to it. They
// are the values key_events.kind admits (its CHECK), which the console reads back.
const (
	KindCreated        = "created"         // the first arrival claimed the key
	KindReplayed       = "replayed"        // a repeat got the stored response
	KindReusedConflict = "reused_conflict" // the key came with another request
	KindInUseRejected  = "in_use_rejected" // a repeat arrived while the key was worked on
	KindResumed        = "resumed"         // a retry took over unfinished work
	KindCompleted      = "completed"       // the key's response was stored
	KindExpired        = "expired"         // the sweeper removed the key (a tombstone stays)
	KindLateRetry      = "late_retry"      // a repeat after the key expired
)

// Meta is who sent a request, for its history entry: what an operator needs to find the caller
// of a replay or a conflict in their own logs.
type Meta struct {
	RequestID  string
	RemoteAddr string
	UserAgent  string
}

// Entry is one entry of a key's history, a row of key_events.
type Entry struct {
	At          time.Time
	ClientID    int64
	Key         string
	KeyID       int64 // 0: no key row (a late retry after the sweep)
	Kind        string
	Status      int // the answer's HTTP status; 0 for the sweeper's entries
	Meta        Meta
	Fingerprint []byte
	Detail      map[string]any
}

// History writes entries without putting a write on the request path: a request hands its
// entry over and goes on; a background writer inserts them in batches, in transactions that
// do not wait for a synchronous commit. A crash loses at most the last fraction of a second
// of entries, never a key, an order or a response. If the database stays unreachable the
// buffer fills and further entries are dropped (and counted) rather than slowing requests.
type History struct {
	db      *sqlx.DB
	logger  *slog.Logger
	ch      chan Entry
	dropped atomic.Int64
	flushes chan chan struct{}
	stop    chan struct{}
	done    sync.WaitGroup
}

const (
	entryBuffer     = 16384
	entryBatch      = 500
	eventFlushEvery = 100 * time.Millisecond
)

// NewHistory starts the history's background writer; Close stops it. One per process: its
// buffer is what a database outage may cost.
func NewHistory(db *sqlx.DB, logger *slog.Logger) *History {
	l := &History{db: db, logger: logger, ch: make(chan Entry, entryBuffer),
		flushes: make(chan chan struct{}), stop: make(chan struct{})}
	l.done.Add(1)
	go l.loop()
	return l
}

// Record hands e to the writer and returns at once, even when the buffer is full (then e
// is dropped and counted): a request never waits for its history.
func (l *History) Record(e Entry) {
	select {
	case l.ch <- e:
	default:
		if l.dropped.Add(1)%1000 == 1 {
			l.logger.Warn("event buffer full: dropping key events", "dropped_total", l.dropped.Load())
		}
	}
}

// Flush writes every entry recorded before the call, for a reader (a test, a page) that
// must see them now rather than within the writer's tenth of a second.
func (l *History) Flush() {
	done := make(chan struct{})
	l.flushes <- done
	<-done
}

// Close writes what is buffered and stops the writer, so that a clean shutdown loses no
// entry.
func (l *History) Close() {
	close(l.stop)
	l.done.Wait()
}

func (l *History) loop() {
	defer l.done.Done()
	t := time.NewTicker(eventFlushEvery)
	defer t.Stop()
	batch := make([]Entry, 0, entryBatch)
	flush := func() {
		if len(batch) > 0 {
			l.write(batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case e := <-l.ch:
			batch = append(batch, e)
			if len(batch) >= entryBatch {
				flush()
			}
		case <-t.C:
			flush()
		case done := <-l.flushes:
			l.drain(&batch, flush)
			close(done)
		case <-l.stop:
			l.drain(&batch, flush)
			return
		}
	}
}

// drain takes everything buffered and writes it.
func (l *History) drain(batch *[]Entry, flush func()) {
	for {
		select {
		case e := <-l.ch:
			*batch = append(*batch, e)
			if len(*batch) >= entryBatch {
				flush()
			}
		default:
			flush()
			return
		}
	}
}

// write inserts a batch, trying a few times while the database is unreachable before
// giving the batch up. If Postgres refuses a row instead, the entries are written one by
// one, so that one bad entry costs only itself and not the history of up to a batch of
// other requests.
func (l *History) write(batch []Entry) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = insertEntries(l.db, batch); err == nil {
			return
		}
		if !tdb.IsUnavailable(err) && len(batch) > 1 {
			l.writeEach(batch)
			return
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	l.dropped.Add(int64(len(batch)))
	l.logger.Warn("key events not written", "err", err, "events", len(batch))
}

func (l *History) writeEach(batch []Entry) {
	var lost int64
	var last error
	for i := range batch {
		if err := insertEntries(l.db, batch[i:i+1]); err != nil {
			lost, last = lost+1, err
		}
	}
	if lost > 0 {
		l.dropped.Add(lost)
		l.logger.Warn("key events refused by the database", "err", last, "events", lost, "batch", len(batch))
	}
}

// eventColumns is a batch of events, one array per column of key_events, for
// insertEventsSQL: one statement writes the batch.
type eventColumns struct {
	At          any `db:"at"`
	ClientID    any `db:"client_id"`
	Key         any `db:"key"`
	KeyID       any `db:"key_id"`
	Kind        any `db:"kind"`
	Status      any `db:"status"`
	RequestID   any `db:"request_id"`
	RemoteAddr  any `db:"remote_addr"`
	UserAgent   any `db:"user_agent"`
	Fingerprint any `db:"fingerprint"`
	Detail      any `db:"detail"`
}

var insertEventsSQL = tdb.Named[eventColumns](`
	INSERT INTO key_events (at, client_id, key, key_id, kind, status, request_id, remote_addr,
	                        user_agent, fingerprint, detail)
	SELECT * FROM unnest(CAST(:at AS timestamptz[]), CAST(:client_id AS bigint[]), CAST(:key AS text[]),
	                     CAST(:key_id AS bigint[]), CAST(:kind AS text[]), CAST(:status AS int[]),
	                     CAST(:request_id AS text[]), CAST(:remote_addr AS text[]), CAST(:user_agent AS text[]),
	                     CAST(:fingerprint AS bytea[]), CAST(:detail AS jsonb[]))`)

func insertEntries(db *sqlx.DB, batch []Entry) error {
	n := len(batch)
	at := make([]string, n)
	client := make([]int64, n)
	key := make([]string, n)
	keyID := make([]any, n)
	kind := make([]string, n)
	status := make([]any, n)
	reqID := make([]any, n)
	addr := make([]any, n)
	ua := make([]any, n)
	fp := make([]any, n)
	detail := make([]any, n)
	for i, e := range batch {
		at[i] = e.At.UTC().Format(time.RFC3339Nano)
		client[i], key[i], kind[i] = e.ClientID, e.Key, e.Kind
		keyID[i] = nullInt(e.KeyID)
		status[i] = nullInt(int64(e.Status))
		reqID[i], addr[i], ua[i] = nullStr(e.Meta.RequestID), nullStr(e.Meta.RemoteAddr), nullStr(pgtext.Clean(e.Meta.UserAgent, 300))
		if e.Fingerprint != nil {
			fp[i] = `\x` + hexString(e.Fingerprint)
		}
		if e.Detail != nil {
			b, err := json.Marshal(e.Detail)
			if err != nil {
				return err
			}
			detail[i] = string(b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tdb.InTx(ctx, db, "record key events", func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		_, err := insertEventsSQL.Exec(ctx, tx, eventColumns{
			At: pq.Array(at), ClientID: pq.Array(client), Key: pq.Array(key), KeyID: pq.GenericArray{A: keyID},
			Kind: pq.Array(kind), Status: pq.GenericArray{A: status}, RequestID: pq.GenericArray{A: reqID},
			RemoteAddr: pq.GenericArray{A: addr}, UserAgent: pq.GenericArray{A: ua},
			Fingerprint: pq.GenericArray{A: fp}, Detail: pq.GenericArray{A: detail}})
		return err
	})
}

func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}
