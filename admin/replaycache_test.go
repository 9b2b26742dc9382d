package admin_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// runApp does e's background work (App.Run, the replay cache's listener among it) until
// the test ends, and waits for its replay cache to serve.
func runApp(t *testing.T, e *apptest.Env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.App.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for start := time.Now(); !e.App.ReplayCache.Serving(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the replay cache does not serve")
		}
	}
}

// TestExpireNowInTheConsoleReachesEveryReplica: two tekrar processes on one database
// answer a key's replays from memory; an operator expires the key in one's console, and
// the other's next replay is refused as expired (422 idempotency_key_expired), not
// answered from its memory.
func TestExpireNowInTheConsoleReachesEveryReplica(t *testing.T) {
	e := apptest.New(t)
	peer := e.Peer(t)
	runApp(t, e)
	runApp(t, peer)
	body := []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":9000}],
		"amount":9000,"payment":{"card_token":"tok_visa"}}`)
	first := e.Do(t, "POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "k-cached")
	if first.Status != http.StatusCreated {
		t.Fatalf("order: %d %s", first.Status, first.Body)
	}
	for _, a := range []*apptest.Env{e, peer} {
		for range 2 { // the first replay reads the database and fills the cache; the second is a hit
			r := a.Do(t, "POST", "/v1/orders", a.Secret, body, "Idempotency-Key", "k-cached")
			if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, first.Body) {
				t.Fatalf("replay: %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
			}
		}
		if n := a.App.ReplayCache.Hits(); n != 1 {
			t.Fatalf("%d replays answered from memory, want 1", n)
		}
		m, err := http.Get(a.MetricsURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(m.Body)
		m.Body.Close()
		for _, line := range []string{"tekrar_replay_cache_hits_total 1\n", "tekrar_replay_cache_entries 1\n", "tekrar_replay_cache_serving 1\n"} {
			if !strings.Contains(string(text), line) {
				t.Errorf("the metrics lack %q", line)
			}
		}
	}

	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	expirePage := keyPath(e, "k-cached") + "/expire"
	if p := b.do("POST", expirePage, actForm(t, b.do("GET", expirePage, nil), expirePage)); p.status != http.StatusSeeOther {
		t.Fatalf("expire: %d %s", p.status, p.body)
	}
	for start := time.Now(); peer.App.ReplayCache.Holds(e.ClientID, "k-cached"); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the other process still holds the expired key")
		}
	}
	for name, a := range map[string]*apptest.Env{"the console's process": e, "the other process": peer} {
		r := a.Do(t, "POST", "/v1/orders", a.Secret, body, "Idempotency-Key", "k-cached")
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "idempotency_key_expired") {
			t.Errorf("%s after expire now: %d %s", name, r.Status, r.Body)
		}
	}
}
