package api_test

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/pglocal"
	"github.com/tekrar/tekrar/migrations"
)

// ghostServer starts a private server whose COMMITs wait for a synchronous standby named
// ghost, which never comes, whenever sync(true) is in force, and serves tekrar on it.
func ghostServer(t *testing.T) (e *apptest.Env, admin *sql.DB, sync func(on bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pglocal.Start(ctx, pglocal.Options{Settings: []string{"synchronous_commit=on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if admin, err = sql.Open("postgres", srv.URL("postgres")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE tekrar"); err != nil {
		t.Fatal(err)
	}
	m, err := sql.Open("postgres", srv.URL("tekrar"))
	if err != nil {
		t.Fatal(err)
	}
	err = migrations.Up(ctx, m)
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A COMMIT that waits sends nothing: the stall timeout must not end it during the test.
	e = apptest.On(t, srv.URL("tekrar"), nil, func(c *config.Server) { c.DBTimeout = time.Minute })
	sync = func(on bool) {
		t.Helper()
		names := map[bool]string{true: "ghost", false: ""}[on]
		if _, err := admin.Exec("ALTER SYSTEM SET synchronous_standby_names = '" + names + "'"); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec("SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the reloaded setting", func() bool {
			var got string
			return admin.QueryRow("SHOW synchronous_standby_names").Scan(&got) == nil && got == names
		})
		time.Sleep(100 * time.Millisecond) // the pool's backends reload before their next command
		if on {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := pglocal.AwaitSyncRep(ctx, admin); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { sync(false) }) // lets every waiting COMMIT finish before the server stops
	return e, admin, sync
}

// terminate ends backend pid and waits until it is gone.
func terminate(t *testing.T, admin *sql.DB, pid int) {
	t.Helper()
	if _, err := admin.Exec("SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the terminated backend to go", func() bool {
		var n int
		return admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n) == nil && n == 0
	})
}

// claimWaiter is the backend whose claim of key (its COMMIT) waits for the standby.
func claimWaiter(t *testing.T, admin *sql.DB) int {
	t.Helper()
	var pid int
	waitFor(t, "a claim waiting for the standby", func() bool {
		return admin.QueryRow(`SELECT pid FROM pg_stat_activity
		    WHERE datname = 'tekrar' AND wait_event = 'SyncRep' AND query LIKE '%idempotency_keys%'`).Scan(&pid) == nil
	})
	return pid
}

// A COMMIT is never cancelled by the request, and one whose outcome is unknown is answered
// as such. On a server whose COMMITs wait for a synchronous standby that never comes: (a) a
// client that gives up on its POST does not cancel the claim's COMMIT, still waiting
// (SyncRep) after the request ended; (b) a claim whose backend is terminated while it waits
// answers 503 commit_unknown, retryable, safe_new_key false, with Retry-After; (c) both
// keys are left as the lost COMMITs left them, in progress with their lease (nothing
// released them), and once the server is back to normal a retry with each key, after the
// lease, pays its order once: one order and one charge in the provider's ledger per key.
func TestACommitWhoseOutcomeIsUnknownIsLeftForTheRetry(t *testing.T) {
	e, admin, sync := ghostServer(t)
	if r := e.Do(t, "GET", "/v1/client", e.Secret, nil); r.Status != 200 { // authenticated once, cached
		t.Fatalf("whoami: %d", r.Status)
	}
	sync(true)

	// (a) The client gives up; the COMMIT goes on.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.URL+"/v1/orders", strings.NewReader(string(orderBody(4200, "tok_visa"))))
		req.Header.Set("Authorization", "Bearer "+e.Secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-gave-up")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	pid := claimWaiter(t, admin)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the POST answered while its claim waited for the standby")
	}
	time.Sleep(300 * time.Millisecond) // the server has seen the client go by now
	var event sql.NullString
	if err := admin.QueryRow(`SELECT wait_event FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&event); err != nil || event.String != "SyncRep" {
		t.Fatalf("after the client went, the claim's backend waits on %q (%v), want SyncRep: its COMMIT was cancelled", event.String, err)
	}
	terminate(t, admin, pid)

	// (b) The backend goes while the client waits: 503 commit_unknown.
	answer := make(chan apptest.Response, 1)
	go func() {
		r, err := e.Send("POST", "/v1/orders", e.Secret, orderBody(4300, "tok_visa"), "Idempotency-Key", "k-unknown")
		if err != nil {
			t.Errorf("POST: %v", err)
		}
		answer <- r
	}()
	pid = claimWaiter(t, admin)
	terminate(t, admin, pid)
	r := <-answer
	p := problemOf(t, r, 503, "commit_unknown")
	advice(t, p, true, false)
	if r.Header.Get("Retry-After") == "" {
		t.Error("503 commit_unknown without Retry-After")
	}

	// (c) The keys stay as the lost COMMITs left them: claimed, leased, not released.
	now := e.Clock.Now()
	for _, key := range []string{"k-gave-up", "k-unknown"} {
		var state string
		var lease time.Time
		if err := e.DB.QueryRow(`SELECT state, lease_expires_at FROM idempotency_keys WHERE key = $1`, key).Scan(&state, &lease); err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		if state != "in_progress" || !lease.After(now) {
			t.Errorf("key %s: %s, lease until %v (now %v): want in_progress with its lease, not released", key, state, lease, now)
		}
	}
	sync(false)
	e.Clock.Advance(e.Config.Lease + time.Second)
	for _, tc := range []struct {
		key    string
		amount int64
	}{{"k-gave-up", 4200}, {"k-unknown", 4300}} {
		if r := postOrder(t, e, e.Secret, tc.key, orderBody(tc.amount, "tok_visa")); r.Status != 201 {
			t.Fatalf("retry of %s: %d %s", tc.key, r.Status, r.Body)
		}
		if n := count(t, e, `SELECT count(*) FROM orders o JOIN idempotency_keys k ON k.order_id = o.id WHERE k.key = $1 AND o.status = 'paid'`, tc.key); n != 1 {
			t.Errorf("key %s: %d paid orders, want 1", tc.key, n)
		}
		if n := count(t, e, `SELECT count(*) FROM psp_charges c JOIN orders o ON c.description = 'order ' || o.public_id
		    JOIN idempotency_keys k ON k.order_id = o.id WHERE k.key = $1 AND c.status = 'succeeded'`, tc.key); n != 1 {
			t.Errorf("key %s: %d charges in the provider's ledger, want 1", tc.key, n)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges`); n != 2 {
		t.Errorf("%d charges in the provider's ledger, want 2", n)
	}
}
