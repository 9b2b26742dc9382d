package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// BenchmarkSweep sweeps n expired keys (tombstone, then delete once settled), as the
// per-process loop did before the scheduler (the sweeper's own advisory lock around a pass)
// and as the scheduled task "sweep" does (the task's lock, a run record, the same pass), in
// the same run, each on a fresh database of its own. Seeding, the clock's advance and the
// clearing of what a pass leaves (tombstones, events) are not timed.
//
//	go test ./internal/app -run '^$' -bench BenchmarkSweep -benchtime 20x
func BenchmarkSweep(b *testing.B) {
	for _, name := range []string{"loop", "scheduled"} {
		b.Run(name, func(b *testing.B) { benchmarkSweep(b, name) })
	}
}

func benchmarkSweep(b *testing.B, variant string) {
	e := apptest.New(b, func(c *config.Server) { c.SweepPause = 0 })
	ctx := context.Background()
	const n = 1000
	seed := func(b *testing.B) {
		b.Helper()
		_, err := e.DB.Exec(`
			WITH o AS (
			    INSERT INTO orders (client_id, status, amount, currency, items, created_at, updated_at)
			    SELECT $1, 'paid', 100, 'TRY', '[]', now(), now() FROM generate_series(1, $2::int) RETURNING id
			)
			INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point,
			                              order_id, response_status, response_body, created_at, expires_at)
			SELECT $1, 'bench-' || id, sha256(id::text::bytea), 'POST', '/v1/orders', 'completed', 'finished',
			       id, 201, '{}'::bytea, $3::timestamptz - interval '2 days', $3::timestamptz - interval '1 day'
			  FROM o`, e.ClientID, n, e.Clock.Now())
		if err != nil {
			b.Fatal(err)
		}
	}
	// loop is a pass as sweeper.Sweeper.Pass ran it before: under the sweeper's own lock.
	loop := func() error {
		conn, err := e.DB.Connx(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		var got bool
		if err := conn.GetContext(ctx, &got, `SELECT pg_try_advisory_lock($1)`, 0x74656b726172); err != nil || !got {
			return err
		}
		defer conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, 0x74656b726172) //nolint:errcheck
		_, err = e.App.Sweeper.Pass(ctx)
		return err
	}
	scheduled := func() error {
		_, err := e.App.Scheduler.RunNow(ctx, "sweep")
		return err
	}
	pass := map[string]func() error{"loop": loop, "scheduled": scheduled}[variant]
	for b.Loop() {
		b.StopTimer()
		seed(b)
		b.StartTimer()
		if err := pass(); err != nil { // tombstones
			b.Fatal(err)
		}
		b.StopTimer()
		e.Clock.Advance(2 * time.Minute)
		b.StartTimer()
		if err := pass(); err != nil { // deletes
			b.Fatal(err)
		}
		b.StopTimer()
		if left := count(b, e, `SELECT count(*) FROM idempotency_keys`); left != 0 {
			b.Fatalf("%d keys left", left)
		}
		if _, err := e.DB.Exec(`DELETE FROM key_tombstones; DELETE FROM key_events`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func count(b *testing.B, e *apptest.Env, q string) (n int) {
	b.Helper()
	if err := e.DB.Get(&n, q); err != nil {
		b.Fatal(err)
	}
	return n
}
