package keyed

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// benchBody is an order's answer of the usual size (one line, a card payment).
var benchBody = []byte(`{"id":"ord_01JEXAMPLE0000000000000000","object":"order","status":"paid","currency":"TRY",` +
	`"amount":1200,"captured_amount":1200,"refunded_amount":0,"items":[{"sku":"LATTE","name":"Latte",` +
	`"quantity":1,"unit_amount":1200}],"payment":{"id":"pay_01JEXAMPLE0000000000000000","status":"succeeded",` +
	`"card":{"brand":"visa","last4":"4242"}},"created_at":"2026-12-06T17:00:00.000000Z","installments":[]}`)

const benchHeaders = `{"Content-Type": "application/json"}`

// BenchmarkReplayFromMemory: replays of one completed key read from the database (one
// indexed SELECT) and answered from the cache, in the same run, each replay recording its
// history entry. It reports each path's time per replay and their ratio (database/memory).
//
//	go test -run '^$' -bench ReplayFromMemory -benchtime 2000x ./checkout/internal/keyed/
func BenchmarkReplayFromMemory(b *testing.B) {
	url := dbtest.NewURL(b)
	d := dbtest.Connect(b, url)
	var client int64
	if err := d.Get(&client, `INSERT INTO clients (name, secret_hash) VALUES ('bench', sha256('bench')) RETURNING id`); err != nil {
		b.Fatal(err)
	}
	body := `{"amount":1200}`
	fp, err := Fingerprint("POST", "/v1/orders", []byte(body))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	if _, err := d.Exec(`
		WITH o AS (
		    INSERT INTO orders (client_id, status, amount, currency, items, captured_amount, refunded_amount, created_at, updated_at)
		    VALUES ($1, 'paid', 1200, 'TRY', '[]', 1200, 0, $5, $5) RETURNING id
		)
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point, order_id,
		                              response_status, response_headers, response_body, created_at, completed_at, expires_at)
		SELECT $1, 'k', $2, 'POST', '/v1/orders', 'completed', 'finished', o.id, 201, $3, $4, $5, $5, $6 FROM o`,
		client, fp[:], benchHeaders, benchBody, now, now.Add(24*time.Hour)); err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	h := NewHistory(d, logger)
	defer h.Close()
	cfg := Config{Lease: time.Minute, Now: time.Now,
		Card: func(context.Context, string) (sql.NullString, error) { return sql.NullString{}, nil }}
	fromDB := New(d, h, cfg, logger)
	c := NewCache(CacheConfig{Bytes: 1 << 20})
	cfg.Cache = c
	fromMemory := New(d, h, cfg, logger)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Listen(ctx, url, d, logger) }()
	defer func() { cancel(); <-done }()
	for !c.Serving() {
		time.Sleep(5 * time.Millisecond)
	}
	req := Request{ClientID: client, Key: "k", Method: "POST", Path: "/v1/orders", Body: []byte(body)}
	replay := func(e *Engine) time.Duration {
		start := time.Now()
		for range b.N {
			if _, _, ok := e.Replay(ctx, req); !ok {
				b.Fatal("not replayed")
			}
		}
		return time.Since(start)
	}
	replay(fromMemory) // fills the cache
	b.ResetTimer()
	db, mem := replay(fromDB), replay(fromMemory)
	b.StopTimer()
	if c.Hits() < int64(b.N) {
		b.Fatalf("%d hits for %d replays from memory", c.Hits(), b.N)
	}
	b.ReportMetric(float64(db.Nanoseconds())/float64(b.N), "db-ns/replay")
	b.ReportMetric(float64(mem.Nanoseconds())/float64(b.N), "mem-ns/replay")
	b.ReportMetric(float64(db)/float64(mem), "db/mem")
}

// BenchmarkReplayCacheMemory: what the cache costs in memory per key, measured on the heap
// (runtime.MemStats) over 100,000 answers of benchBody's size, each its own copy as a
// database read makes it, beside what the bound counts for them (entrySize): heap-B/key
// should not exceed counted-B/key, or the bound understates what the cache takes.
//
//	go test -run '^$' -bench ReplayCacheMemory -benchtime 1x ./checkout/internal/keyed/
func BenchmarkReplayCacheMemory(b *testing.B) {
	const n = 100_000
	for range b.N {
		c := NewCache(CacheConfig{Bytes: 1 << 40})
		c.beatHeard(c.mono())
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			k := fmt.Sprintf("pos-%s-%08d", strings.Repeat("x", 16), i) // a till's key: ~30 bytes
			hd, err := DecodeHeaders([]byte(benchHeaders))
			if err != nil {
				b.Fatal(err)
			}
			body := append([]byte(nil), benchBody...)
			c.put(c.stamp(), &cached{k: cacheKey{1, k}, keyID: int64(i), resp: Response{Status: 201, Header: hd, Body: body},
				expiresAt: time.Now().Add(time.Hour)})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.Len() != n {
			b.Fatalf("%d entries, want %d", c.Len(), n)
		}
		heap := float64(after.HeapAlloc-before.HeapAlloc) / n
		b.ReportMetric(heap, "heap-B/key")
		b.ReportMetric(float64(c.Bytes())/n, "counted-B/key")
		b.ReportMetric(heap-float64(len(benchBody)), "overhead-B/key")
		runtime.KeepAlive(c)
	}
}
