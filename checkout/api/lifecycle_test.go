package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/sweeper"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/schedule"
)

type eventRow struct {
	Kind       string  `db:"kind"`
	Status     *int    `db:"status"`
	RequestID  *string `db:"request_id"`
	RemoteAddr *string `db:"remote_addr"`
	UserAgent  *string `db:"user_agent"`
	Key        string  `db:"key"`
	HasFP      bool    `db:"has_fp"`
}

// events returns a key's history, oldest first, after flushing what is buffered.
func events(t *testing.T, e *apptest.Env, key string) []eventRow {
	t.Helper()
	e.App.Service.FlushHistory()
	var rows []eventRow
	if err := e.DB.Select(&rows, `SELECT kind, status, request_id, remote_addr, user_agent, key, fingerprint IS NOT NULL AS has_fp
		FROM key_events WHERE key = $1 ORDER BY at, id`, key); err != nil {
		t.Fatal(err)
	}
	return rows
}

func kinds(rows []eventRow) string {
	var s []string
	for _, r := range rows {
		st := 0
		if r.Status != nil {
			st = *r.Status
		}
		s = append(s, fmt.Sprintf("%s:%d", r.Kind, st))
	}
	return fmt.Sprint(s)
}

// Every keyed request leaves exactly one event of the kind that fits what it did (a request
// that completes its key leaves a second one, completed), carrying who sent it.
func TestEachRequestLeavesItsEvent(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) {
		c.ProviderTimeout = time.Second
		c.SandboxSlowDelay = 500 * time.Millisecond
	})
	body := orderBody(9000, "tok_visa")
	send := func(key string, b []byte, extra ...string) apptest.Response {
		t.Helper()
		return e.Do(t, "POST", "/v1/orders", e.Secret, b, append([]string{"Idempotency-Key", key, "User-Agent", "tekrar-ios/1.2"}, extra...)...)
	}
	first := send("k-ev", body)
	replay := send("k-ev", body)
	conflict := send("k-ev", orderBody(9001, "tok_visa"))
	rows := events(t, e, "k-ev")
	if got := kinds(rows); got != "[created:201 completed:201 replayed:201 reused_conflict:422]" {
		t.Fatalf("events %s", got)
	}
	for i, want := range []string{first.Header.Get("X-Request-Id"), first.Header.Get("X-Request-Id"), replay.Header.Get("X-Request-Id"), conflict.Header.Get("X-Request-Id")} {
		r := rows[i]
		if r.RequestID == nil || *r.RequestID != want || r.RemoteAddr == nil || *r.RemoteAddr != "127.0.0.1" || r.UserAgent == nil || *r.UserAgent != "tekrar-ios/1.2" {
			t.Fatalf("event %d (%s) carries %v %v %v, want request %s from 127.0.0.1", i, r.Kind, deref(r.RequestID), deref(r.RemoteAddr), deref(r.UserAgent), want)
		}
	}
	if !rows[3].HasFP {
		t.Error("a conflict does not record the differing fingerprint")
	}

	// An unknown provider outcome: created with its 503, then a retry resumes and completes.
	send("k-ev-timeout", orderBody(5000, "tok_timeout"))
	send("k-ev-timeout", orderBody(5000, "tok_timeout"))
	if got := kinds(events(t, e, "k-ev-timeout")); got != "[created:503 resumed:201 completed:201]" {
		t.Fatalf("timeout events %s", got)
	}

	// A repeat while the first is in flight.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.Send("POST", "/v1/orders", e.Secret, orderBody(5000, "tok_slow"), "Idempotency-Key", "k-ev-slow")
	}()
	waitFor(t, "the slow key", func() bool { return count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-ev-slow'`) == 1 })
	send("k-ev-slow", orderBody(5000, "tok_slow"))
	<-done
	if got := kinds(events(t, e, "k-ev-slow")); got != "[in_use_rejected:409 created:201 completed:201]" {
		t.Fatalf("in-flight events %s", got)
	}

	// A retry after expiry.
	e.Clock.Advance(25 * time.Hour)
	send("k-ev", body)
	if got := kinds(events(t, e, "k-ev")); got != "[created:201 completed:201 replayed:201 reused_conflict:422 late_retry:422]" {
		t.Fatalf("events after expiry %s", got)
	}
	// Refused before the key (validation): no event, nothing stored.
	send("k-ev-invalid", orderBody2(100, 200))
	if rows := events(t, e, "k-ev-invalid"); len(rows) != 0 {
		t.Fatalf("a refused request left events %s", kinds(rows))
	}
}

// TestUserAgentsPostgresCannotStoreKeepTheHistory: HTTP allows bytes in a header that are
// not UTF-8, which Postgres text refuses. Such a User-Agent, or a long one cut inside a
// character, used to fail the whole batch of events it was written with, the history of
// other requests included. Each event is kept, the agent made storable.
func TestUserAgentsPostgresCannotStoreKeepTheHistory(t *testing.T) {
	e := apptest.New(t)
	long := strings.Repeat("a", 299) + "é" // 301 bytes: the 300-byte cut falls inside é
	agents := map[string]string{
		"k-ua-latin1": "caf\xe9-app/1.0",
		"k-ua-long":   long,
		"k-ua-plain":  "tekrar-ios/1.2",
	}
	for key, ua := range agents {
		if r := e.Do(t, "POST", "/v1/orders", e.Secret, orderBody(100, "tok_visa"), "Idempotency-Key", key, "User-Agent", ua); r.Status != 201 {
			t.Fatalf("%s: %d %s", key, r.Status, r.Body)
		}
	}
	want := map[string]string{
		"k-ua-latin1": "caf\uFFFD-app/1.0",
		"k-ua-long":   strings.Repeat("a", 299),
		"k-ua-plain":  "tekrar-ios/1.2",
	}
	for key, ua := range want {
		rows := events(t, e, key)
		if got := kinds(rows); got != "[created:201 completed:201]" {
			t.Fatalf("%s: events %s", key, got)
		}
		if got := deref(rows[0].UserAgent); got != ua {
			t.Errorf("%s: user agent %q, want %q", key, got, ua)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func sweep(t *testing.T, e *apptest.Env) sweeper.Result {
	t.Helper()
	res, err := e.App.Sweeper.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The life of a key: replayed until its TTL, refused (and recorded as a late retry) while
// its tombstone lasts, forgotten after the grace period and then new again.
func TestExpiryTombstoneAndGrace(t *testing.T) {
	e := apptest.New(t)
	body := orderBody(9000, "tok_visa")
	first := postOrder(t, e, e.Secret, "k-life", body)
	orderID := decodeOrder(t, first).ID

	if res := sweep(t, e); res.KeysTombstoned != 0 || res.KeysDeleted != 0 {
		t.Fatalf("swept a live key: %+v", res)
	}
	e.Clock.Advance(24*time.Hour + time.Second)
	if res := sweep(t, e); res.KeysTombstoned != 1 || res.KeysDeleted != 0 {
		t.Fatalf("first pass after expiry: %+v (the row must outlive its new tombstone for a while)", res)
	}
	e.Clock.Advance(2 * time.Minute)
	if res := sweep(t, e); res.KeysDeleted != 1 {
		t.Fatalf("second pass: %+v", res)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-life'`); n != 0 {
		t.Fatal("the key row is still there")
	}
	if n := count(t, e, `SELECT count(*) FROM key_tombstones t JOIN orders o ON o.id = t.order_id
		 WHERE t.key = 'k-life' AND o.public_id = $1 AND t.key_id IS NULL`, orderID); n != 1 {
		t.Fatal("no settled tombstone naming the order")
	}
	if rows := events(t, e, "k-life"); kinds(rows) != "[created:201 completed:201 expired:0]" {
		t.Fatalf("events %s", kinds(rows))
	}

	// A very late retry of the same purchase is refused and names the order; a new key is not
	// safe for it. Another purchase under the old key may take a new key.
	late := postOrder(t, e, e.Secret, "k-life", body)
	p := problemOf(t, late, 422, "idempotency_key_expired")
	advice(t, p, false, false)
	if p["order_id"] != orderID {
		t.Fatalf("late retry problem %s", late.Body)
	}
	other := postOrder(t, e, e.Secret, "k-life", orderBody(100, "tok_visa"))
	advice(t, problemOf(t, other, 422, "idempotency_key_expired"), false, true)
	// The same for a refund key.
	if r, _ := refund(e, e.Secret, orderID, "k-life", 100); r.Status != 422 {
		t.Fatalf("refund with a tombstoned key: %d %s", r.Status, r.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders: a late retry was executed", n)
	}
	if rows := events(t, e, "k-life"); kinds(rows) != "[created:201 completed:201 expired:0 late_retry:422 late_retry:422 late_retry:422]" {
		t.Fatalf("events %s", kinds(rows))
	}

	// After the grace period (30 days by default) the key is forgotten and new again.
	e.Clock.Advance(30 * 24 * time.Hour)
	if res := sweep(t, e); res.TombstonesForgotten != 1 {
		t.Fatalf("pass after the grace: %+v", res)
	}
	again := postOrder(t, e, e.Secret, "k-life", body)
	if again.Status != 201 || decodeOrder(t, again).ID == orderID {
		t.Fatalf("after the grace period: %d %s", again.Status, again.Body)
	}
	// Sweeps are recorded.
	if n := count(t, e, `SELECT count(*) FROM sweeps WHERE error IS NULL`); n != 4 {
		t.Fatalf("%d sweeps recorded, want 4", n)
	}
}

// A tombstone still in its grace period is honoured even before the sweeper forgets it,
// and a tombstone past its grace no longer blocks the key, whether or not it was swept.
func TestGraceIsPerClient(t *testing.T) {
	e := apptest.New(t)
	if _, err := e.DB.Exec(`UPDATE clients SET tombstone_grace = interval '1 hour' WHERE id = $1`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	postOrder(t, e, e.Secret, "k-grace", orderBody(9000, "tok_visa"))
	e.Clock.Advance(24*time.Hour + time.Second)
	sweep(t, e)
	e.Clock.Advance(2 * time.Minute)
	sweep(t, e)
	problemOf(t, postOrder(t, e, e.Secret, "k-grace", orderBody(9000, "tok_visa")), 422, "idempotency_key_expired")
	e.Clock.Advance(time.Hour) // past the client's one-hour grace; no sweep yet
	if r := postOrder(t, e, e.Secret, "k-grace", orderBody(9000, "tok_visa")); r.Status != 201 {
		t.Fatalf("after the client's grace: %d %s", r.Status, r.Body)
	}
}

// Work that is not finished is never expired: an operator or a retry still needs it.
func TestUnfinishedKeysAreNotSwept(t *testing.T) {
	e := apptest.New(t)
	advice(t, problemOf(t, postOrder(t, e, e.Secret, "k-open", orderBody(9000, "tok_fail")), 503, "payment_pending"), true, false)
	if _, err := e.DB.Exec(`INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point,
		order_id, attention_reason, created_at, expires_at)
		SELECT client_id, 'k-attention', fingerprint, method, path, 'needs_attention', recovery_point, order_id,
		       'provider keeps failing', created_at, expires_at FROM idempotency_keys WHERE key = 'k-open'`); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(48 * time.Hour)
	for i := 0; i < 2; i++ {
		if res := sweep(t, e); res.KeysTombstoned != 0 || res.KeysDeleted != 0 {
			t.Fatalf("swept unfinished work: %+v", res)
		}
		e.Clock.Advance(2 * time.Minute)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys`); n != 2 {
		t.Fatalf("%d keys left, want 2", n)
	}
}

// Two sweepers at once (two replicas, each running the task "sweep"): their passes take
// turns, each expired key is tombstoned and deleted exactly once, and no live key is touched.
func TestConcurrentSweepers(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.SweepBatch = 100; c.SweepPause = 0 })
	const expired, live = 2500, 300
	// Seed directly: expired completed keys with their orders, and live ones.
	_, err := e.DB.Exec(`
		WITH o AS (
		    INSERT INTO orders (client_id, status, amount, currency, items, created_at, updated_at)
		    SELECT $1, 'paid', 100, 'TRY', '[]', now(), now() FROM generate_series(1, $2::int + $3::int)
		    RETURNING id
		), n AS (SELECT id, row_number() OVER (ORDER BY id) AS i FROM o)
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point,
		                              order_id, response_status, response_body, created_at, expires_at)
		SELECT $1, 'seed-' || i, sha256(i::text::bytea), 'POST', '/v1/orders', 'completed', 'finished',
		       id, 201, '{}'::bytea, now() - interval '2 days',
		       CASE WHEN i <= $2::int THEN now() - interval '1 day' + i * interval '1 second' ELSE now() + interval '1 day' END
		  FROM n`, e.ClientID, expired, live)
	if err != nil {
		t.Fatal(err)
	}
	// The second replica's sweeper, run as serve runs it: the scheduled task "sweep".
	second, err := schedule.New(e.DB.DB, schedule.Config{Now: e.Clock.Now},
		app.SweepTask(e.Config, sweeper.New(e.DB, sweeper.Config{Batch: 100, Now: e.Clock.Now}, discardLogger())))
	if err != nil {
		t.Fatal(err)
	}
	run := func(s *schedule.Scheduler, passes int) {
		for i := 0; i < passes; i++ {
			if _, err := s.RunNow(context.Background(), "sweep"); err != nil {
				t.Error(err)
				return
			}
		}
	}
	race := func() {
		var wg sync.WaitGroup
		wg.Go(func() { run(e.App.Scheduler, 20) })
		wg.Go(func() { run(second, 20) })
		wg.Wait()
	}
	race()
	if n := count(t, e, `SELECT count(*) FROM key_tombstones`); n != expired {
		t.Fatalf("%d tombstones, want %d", n, expired)
	}
	e.Clock.Advance(2 * time.Minute)
	race()
	// One pass at a time: no two passes that ran overlapped.
	if n := count(t, e, `SELECT count(*) FROM schedule_runs a JOIN schedule_runs b ON a.id < b.id
		 WHERE a.task = 'sweep' AND b.task = 'sweep' AND a.outcome = 'ok' AND b.outcome = 'ok'
		   AND a.started_at < b.finished_at AND b.started_at < a.finished_at`); n != 0 {
		t.Fatalf("%d pairs of sweeps overlapped", n)
	}
	if n := count(t, e, `SELECT count(*) FROM schedule_runs WHERE task = 'sweep' AND outcome = 'ok'`); n < 2 {
		t.Fatalf("%d sweeps ran", n)
	}
	e.App.Service.FlushHistory()
	if n := count(t, e, `SELECT count(*) FROM key_events WHERE kind = 'expired'`); n != expired {
		t.Fatalf("%d expired events, want %d", n, expired)
	}
	if n := count(t, e, `SELECT count(DISTINCT key) FROM key_events WHERE kind = 'expired'`); n != expired {
		t.Fatalf("a key expired twice")
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys`); n != live {
		t.Fatalf("%d keys left, want the %d live ones", n, live)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE expires_at > now()`); n != live {
		t.Fatal("a live key was swept")
	}
}

func TestEventRetention(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.EventRetention = 24 * time.Hour })
	postOrder(t, e, e.Secret, "k-old", orderBody(9000, "tok_visa"))
	e.App.Service.FlushHistory()
	e.Clock.Advance(23 * time.Hour)
	postOrder(t, e, e.Secret, "k-old", orderBody(9000, "tok_visa"))
	e.App.Service.FlushHistory()
	e.Clock.Advance(2 * time.Hour)
	res := sweep(t, e)
	if res.EventsDeleted != 2 {
		t.Fatalf("deleted %d events, want the 2 older than a day", res.EventsDeleted)
	}
	if rows := events(t, e, "k-old"); kinds(rows) != "[replayed:201]" {
		t.Fatalf("left %s", kinds(rows))
	}
}

func TestClientSettingsBounds(t *testing.T) {
	e := apptest.New(t)
	// The database refuses what the CLI refuses, whatever writes it.
	for _, q := range []string{
		`UPDATE clients SET key_ttl = interval '30 seconds'`,
		`UPDATE clients SET key_ttl = interval '91 days'`,
		`UPDATE clients SET tombstone_grace = interval '10 minutes'`,
	} {
		if _, err := e.DB.Exec(q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	var keyTTL, grace float64
	if err := e.DB.QueryRow(`SELECT extract(epoch FROM key_ttl), extract(epoch FROM tombstone_grace) FROM clients WHERE id = $1`, e.ClientID).Scan(&keyTTL, &grace); err != nil {
		t.Fatal(err)
	}
	if keyTTL != 24*3600 || grace != 30*24*3600 {
		t.Fatalf("defaults %v s, %v s", keyTTL, grace)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
