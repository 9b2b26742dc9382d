package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// postgresProcs returns the postmaster serving dbURL (from its socket's lock file, whose
// first line is the postmaster's pid) and its children, the backends and workers.
func postgresProcs(t *testing.T, dbURL string) []int {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	host, port := u.Query().Get("host"), u.Query().Get("port")
	if host == "" || port == "" {
		t.Fatalf("the test database is not on a local socket: %s", dbURL)
	}
	lock, err := os.ReadFile(filepath.Join(host, ".s.PGSQL."+port+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(lock), "\n")
	postmaster, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("postmaster pid in the socket lock file: %v", err)
	}
	pids := []int{postmaster}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(postmaster) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// freezePostgres stops the whole test server with SIGSTOP, as a hung host would: it
// accepts connections and reads queries into socket buffers, and answers nothing. The
// returned function (also run at cleanup) resumes it.
func freezePostgres(t *testing.T, dbURL string) (thaw func()) {
	t.Helper()
	dbtest.Server(t) // fails the test on a shared server, which is not ours to stop
	pids := postgresProcs(t, dbURL)
	for _, pid := range pids { // the postmaster first: it forks no backend once stopped
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
	}
	thawed := false
	thaw = func() {
		if thawed {
			return
		}
		thawed = true
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// timedRequest is Env.Do with a client timeout, so that a hanging server fails the test
// instead of hanging it, and the time the answer took.
func timedRequest(t *testing.T, e *apptest.Env, method, path, secret string, body []byte, headers ...string) (apptest.Response, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, time.Since(start)
}

// With Postgres frozen (SIGSTOP: connections are accepted, nothing is answered), every
// request that needs the database answers 503 store_unavailable within the configured
// database timeout instead of waiting for as long as the database is frozen, /readyz
// included; once Postgres resumes, the same key goes through and nothing was executed
// twice.
func TestFrozenDatabaseAnswers503(t *testing.T) {
	const timeout = time.Second
	e := apptest.New(t, func(c *config.Server) { c.DBTimeout = timeout })
	warm := postOrder(t, e, e.Secret, "k-before-freeze", orderBody(9000, "tok_visa"))
	if warm.Status != 201 {
		t.Fatalf("before the freeze: %d %s", warm.Status, warm.Body)
	}
	orderID := decodeOrder(t, warm).ID
	uncached, _ := e.NewClient(t, "not yet authenticated")
	if r := e.Do(t, "GET", "/readyz", "", nil); r.Status != 200 {
		t.Fatalf("readyz before the freeze: %d", r.Status)
	}

	thaw := freezePostgres(t, e.DBURL)
	tests := []struct {
		name, method, path, secret string
		body                       []byte
		headers                    []string
	}{
		{"new order", "POST", "/v1/orders", e.Secret, orderBody(9000, "tok_visa"), []string{"Idempotency-Key", "k-frozen"}},
		{"replay", "POST", "/v1/orders", e.Secret, orderBody(9000, "tok_visa"), []string{"Idempotency-Key", "k-before-freeze"}},
		{"refund", "POST", "/v1/orders/" + orderID + "/refunds", e.Secret, []byte(`{"amount":100}`), []string{"Idempotency-Key", "k-frozen-refund"}},
		{"read an order", "GET", "/v1/orders/" + orderID, e.Secret, nil, nil},
		{"key status", "GET", "/v1/idempotency-keys/k-before-freeze", e.Secret, nil, nil},
		{"authenticate", "GET", "/v1/client", uncached, nil, nil},
		{"readiness", "GET", "/readyz", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, took := timedRequest(t, e, tt.method, tt.path, tt.secret, tt.body, tt.headers...)
			problemOf(t, r, 503, "store_unavailable")
			if took > 3*timeout {
				t.Errorf("answered after %v, more than 3x the database timeout of %v", took, timeout)
			}
			t.Logf("503 after %v", took)
		})
	}

	thaw()
	waitFor(t, "readyz after the thaw", func() bool {
		r, _ := timedRequest(t, e, "GET", "/readyz", "", nil)
		return r.Status == 200
	})
	if r := postOrder(t, e, e.Secret, "k-frozen", orderBody(9000, "tok_visa")); r.Status != 201 {
		t.Fatalf("the refused key after the thaw: %d %s", r.Status, r.Body)
	}
	if r := postOrder(t, e, e.Secret, "k-before-freeze", orderBody(9000, "tok_visa")); r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after the thaw: %d %v", r.Status, r.Header)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges`); n != 2 {
		t.Fatalf("%d charges, want 2", n)
	}
	if n := count(t, e, `SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds, want none", n)
	}
}
