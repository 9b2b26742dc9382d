package api_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// With the database unreachable tekrar fails closed: 503 store_unavailable, nothing
// executed, and the same key goes through once the database is back.
func TestStoreUnavailableFailsClosed(t *testing.T) {
	e := apptest.New(t)
	u, err := url.Parse(e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin, err := sqlx.Open("postgres", dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	setConnections := func(allow bool) {
		t.Helper()
		ctx := context.Background()
		// The name comes from the test helper, not from input; identifiers cannot be bound.
		if _, err := admin.ExecContext(ctx, `ALTER DATABASE "`+name+`" WITH ALLOW_CONNECTIONS `+map[bool]string{true: "true", false: "false"}[allow]); err != nil {
			t.Fatal(err)
		}
		if !allow {
			if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Authenticate once, so that the secret is cached and the request reaches the key.
	if r := e.Do(t, "GET", "/v1/client", e.Secret, nil); r.Status != 200 {
		t.Fatalf("whoami: %d", r.Status)
	}
	setConnections(false)
	r := postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_visa"))
	p := problemOf(t, r, 503, "store_unavailable")
	advice(t, p, true, false)
	if r.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if r := e.Do(t, "GET", "/readyz", "", nil); r.Status != 503 {
		t.Errorf("readyz with the database down: %d", r.Status)
	}
	// A read carries no key, so its 503 carries no key advice: retryable and safe_new_key
	// speak of a key it has not got, Idempotent-Replayed of a replay it cannot be.
	for _, path := range []string{"/v1/orders/ord_00000000000000000000000000000000", "/v1/orders?customer_id=cus_1"} {
		r := e.Do(t, "GET", path, e.Secret, nil)
		problemOf(t, r, 503, "store_unavailable")
		for _, member := range []string{`"retryable"`, `"safe_new_key"`} {
			if strings.Contains(string(r.Body), member) {
				t.Errorf("GET %s: %s in a keyless answer: %s", path, member, r.Body)
			}
		}
		if h := r.Header.Get("Idempotent-Replayed"); h != "" {
			t.Errorf("GET %s: Idempotent-Replayed %q", path, h)
		}
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s: 503 without Retry-After", path)
		}
	}
	setConnections(true)
	// Nor does a refused read.
	for _, path := range []string{"/v1/orders", "/v1/orders?customer_id=cus_1&limit=0", "/v1/products?limit=0"} {
		r := e.Do(t, "GET", path, e.Secret, nil)
		problemOf(t, r, 422, "validation_failed")
		for _, member := range []string{`"retryable"`, `"safe_new_key"`} {
			if strings.Contains(string(r.Body), member) {
				t.Errorf("GET %s: %s in a keyless answer: %s", path, member, r.Body)
			}
		}
	}
	if r := postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_visa")); r.Status != 201 {
		t.Fatalf("after recovery: %d %s", r.Status, r.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders", n)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Fatalf("%d charges", n)
	}
}

func TestUnauthenticated(t *testing.T) {
	e := apptest.New(t)
	tests := []struct{ name, auth string }{
		{"missing", ""},
		{"unknown secret", "Bearer tekrar_sk_nope"},
		{"wrong scheme", "Basic " + e.Secret},
		{"empty bearer", "Bearer "},
	}
	for _, tt := range tests {
		for _, route := range []struct{ method, path string }{{"GET", "/v1/client"}, {"POST", "/v1/orders"}, {"GET", "/v1/orders/1"}} {
			t.Run(tt.name+" "+route.method+" "+route.path, func(t *testing.T) {
				r := e.Do(t, route.method, route.path, "", orderBody(9000, "tok_visa"), "Authorization", tt.auth, "Idempotency-Key", "k-auth")
				advice(t, problemOf(t, r, 401, "unauthorized"), false, true)
				if r.Header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			})
		}
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("an unauthenticated request stored a key")
	}
	// Known routes with the wrong method and unknown routes are problems too.
	problemOf(t, e.Do(t, "DELETE", "/v1/orders", e.Secret, nil), 405, "method_not_allowed")
	problemOf(t, e.Do(t, "GET", "/v1/nothing-here", e.Secret, nil), 404, "not_found")
	if r := e.Do(t, "GET", "/v1/client", e.Secret, nil); r.Status != 200 || r.Header.Get("X-Request-Id") == "" {
		t.Fatalf("whoami %d, request id %q", r.Status, r.Header.Get("X-Request-Id"))
	}
}
