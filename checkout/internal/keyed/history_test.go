package keyed

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// TestHistoryStatementBound: insertEventsSQL was bound when the package loaded
// (internal/db.Named); it kept no name.
func TestHistoryStatementBound(t *testing.T) {
	if i := strings.IndexByte(insertEventsSQL.Text, ':'); i >= 0 {
		t.Errorf("a ':' is left at %d:\n%s", i, insertEventsSQL.Text)
	}
}

// eventRow is a key_events row as the console reads it.
type eventRow struct {
	Key         string  `db:"key"`
	KeyID       *int64  `db:"key_id"`
	Kind        string  `db:"kind"`
	Status      *int    `db:"status"`
	RequestID   *string `db:"request_id"`
	UserAgent   *string `db:"user_agent"`
	Fingerprint []byte  `db:"fingerprint"`
	Detail      *string `db:"detail"`
}

// TestHistoryWritesEvents: what Record is handed is in key_events once Flush returns, a zero
// key id, status or meta stored as NULL, and a refused row (a kind key_events does not
// admit) costs only itself, not the batch it came in (write's one-by-one retry), and is
// counted as dropped.
func TestHistoryWritesEvents(t *testing.T) {
	d := dbtest.New(t)
	h := NewHistory(d, slog.New(slog.DiscardHandler))
	defer h.Close()
	at := time.Now()
	h.Record(Entry{At: at, ClientID: 1, Key: "k-1", KeyID: 7, Kind: KindCreated, Status: 201,
		Meta: Meta{RequestID: "req-1", UserAgent: "curl/8"}, Detail: map[string]any{"order_id": "ord_1"}})
	h.Record(Entry{At: at, ClientID: 1, Key: "k-1", Kind: "not_a_kind", Status: 201})
	h.Record(Entry{At: at, ClientID: 1, Key: "k-1", Kind: KindReusedConflict, Status: 422, Fingerprint: []byte{0xab, 0x01}})
	h.Flush()

	var rows []eventRow
	if err := d.Select(&rows, `SELECT key, key_id, kind, status, request_id, user_agent, fingerprint, detail::text AS detail
		FROM key_events ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want the two admitted events: %+v", len(rows), rows)
	}
	created, conflict := rows[0], rows[1]
	if created.Kind != KindCreated || created.KeyID == nil || *created.KeyID != 7 || created.Status == nil || *created.Status != 201 ||
		created.RequestID == nil || *created.RequestID != "req-1" || created.UserAgent == nil || *created.UserAgent != "curl/8" ||
		created.Fingerprint != nil || created.Detail == nil {
		t.Errorf("created: %+v", created)
	} else {
		var detail map[string]string
		if err := json.Unmarshal([]byte(*created.Detail), &detail); err != nil || detail["order_id"] != "ord_1" {
			t.Errorf("created's detail %s (%v)", *created.Detail, err)
		}
	}
	if conflict.Kind != KindReusedConflict || conflict.KeyID != nil || conflict.RequestID != nil || conflict.Detail != nil ||
		string(conflict.Fingerprint) != "\xab\x01" {
		t.Errorf("conflict: %+v", conflict)
	}
	if n := h.dropped.Load(); n != 1 {
		t.Errorf("%d events dropped, want the refused one", n)
	}
}

// TestHistoryDropsWhenFull: Record never waits; with the buffer full an event is dropped and
// counted (a History whose writer has not started keeps its buffer full).
func TestHistoryDropsWhenFull(t *testing.T) {
	h := &History{logger: slog.New(slog.DiscardHandler), ch: make(chan Entry, 1)}
	h.Record(Entry{Kind: KindReplayed})
	h.Record(Entry{Kind: KindReplayed})
	h.Record(Entry{Kind: KindReplayed})
	if n := h.dropped.Load(); n != 2 {
		t.Errorf("%d dropped, want the 2 that found the buffer full", n)
	}
}
