package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// startServe runs `tekrar serve` on dbURL at a port of its own and waits until it is ready.
// It returns the process and its base URL.
func startServe(t testing.TB, dbURL string, port int, extraEnv ...string) (*proc, string) {
	t.Helper()
	env := childEnv(append([]string{"DATABASE_URL=" + dbURL, "TEKRAR_ADDR=" + addrOf(port)}, extraEnv...)...)
	p := startTekrar(t, env, nil, "serve")
	base := "http://" + addrOf(port)
	waitReady(t, p, base, 30*time.Second)
	return p, base
}

// TestServeEndToEnd runs `tekrar serve` as an operator would: probes, authentication, a
// client created by the CLI, and a SIGTERM that lets an in-flight payment finish.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	port := freePorts(t, 1)[0]
	const shutdownTimeout = 10 * time.Second
	p, base := startServe(t, dbURL, port,
		"TEKRAR_SHUTDOWN_TIMEOUT="+shutdownTimeout.String(), "TEKRAR_SANDBOX_SLOW_DELAY=2s")
	c := newHTTPClient()

	problemOf(t, mustSend(t, c, "GET", base+"/v1/client", "", nil), 401, "unauthorized")
	problemOf(t, mustSend(t, c, "GET", base+"/v1/client", "tekrar_sk_not_a_real_secret", nil), 401, "unauthorized")

	secret := newClientSecret(t, dbURL, "e2e app")
	if r := mustSend(t, c, "GET", base+"/v1/client", secret, nil); r.Status != 200 {
		t.Fatalf("GET /v1/client with a fresh secret: %d %s", r.Status, r.Body)
	}

	// A slow payment is in flight when SIGTERM arrives.
	slow := make(chan response, 1)
	slowErr := make(chan error, 1)
	go func() {
		r, err := send(c, "POST", base+"/v1/orders", secret, orderJSONBody(100, "tok_slow"), "Idempotency-Key", "slow-1")
		if err != nil {
			slowErr <- err
			return
		}
		slow <- r
	}()
	// The key row is committed before the provider is called: once it is there, the request
	// is inside the server.
	waitUntil(t, 10*time.Second, "the slow order to reach the provider", func() bool {
		return countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'`) == 1
	})
	termAt := time.Now()
	p.signal(t, syscall.SIGTERM)

	// New connections are refused while the slow request is still being served.
	waitUntil(t, 5*time.Second, "the listener to close after SIGTERM", func() bool {
		conn, err := net.DialTimeout("tcp", addrOf(port), time.Second)
		if err == nil {
			conn.Close()
			return false
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	select {
	case r := <-slow:
		t.Fatalf("the slow request finished (%d) before new connections were refused: the test proves nothing", r.Status)
	case err := <-slowErr:
		t.Fatalf("slow request: %v", err)
	default:
	}
	if p.exited() {
		t.Fatalf("tekrar exited while a request was in flight (%v)\nstderr:\n%s", p.err, p.stderr)
	}

	select {
	case r := <-slow:
		if r.Status != 201 {
			t.Fatalf("the in-flight order got %d, want 201: %s", r.Status, r.Body)
		}
		if got := r.Header.Get("Idempotent-Replayed"); got != "false" {
			t.Errorf("Idempotent-Replayed %q, want false", got)
		}
	case err := <-slowErr:
		t.Fatalf("the in-flight order failed during shutdown: %v", err)
	case <-time.After(shutdownTimeout):
		t.Fatal("the in-flight order got no answer within the shutdown timeout")
	}
	if code := p.wait(t, shutdownTimeout); code != 0 {
		t.Fatalf("tekrar serve exited %d after SIGTERM, want 0\nstderr:\n%s", code, p.stderr)
	}
	if took := time.Since(termAt); took > shutdownTimeout {
		t.Errorf("shutdown took %v, over the %v timeout", took, shutdownTimeout)
	}
	if n := countRows(t, db, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != 1 {
		t.Errorf("%d paid orders after shutdown, want 1", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE state = 'completed'`); n != 1 {
		t.Errorf("%d completed keys after shutdown, want 1", n)
	}
	if _, err := net.DialTimeout("tcp", addrOf(port), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial after exit: %v, want connection refused", err)
	}

	// serve logs JSON by default: every line of stderr is one JSON object.
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("stderr line is not JSON: %s", line)
		}
	}
	if s := p.stdout.String(); s != "" {
		t.Errorf("serve wrote to stdout: %s", s)
	}
}

// storm sends n requests at once and fails the test if any of them got no answer.
func storm(t *testing.T, n int, do func(i int) (response, error)) []response {
	t.Helper()
	out := make([]response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = do(i)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return out
}

// checkOneOutcome asserts that rs are the answers to one intent: every 201 byte-identical,
// anything else a 409 in-use problem, and exactly one first execution.
func checkOneOutcome(t *testing.T, what string, rs []response) {
	t.Helper()
	var body []byte
	fresh := 0
	for i, r := range rs {
		switch r.Status {
		case 201:
			if body == nil {
				body = r.Body
			} else if !bytes.Equal(body, r.Body) {
				t.Fatalf("%s: response %d differs:\n%s\n%s", what, i, r.Body, body)
			}
			switch r.Header.Get("Idempotent-Replayed") {
			case "false":
				fresh++
			case "true":
			default:
				t.Fatalf("%s: response %d has Idempotent-Replayed %q", what, i, r.Header.Get("Idempotent-Replayed"))
			}
		case 409:
			problemOf(t, r, 409, "idempotency_key_in_use")
		default:
			t.Fatalf("%s: response %d: %d %s", what, i, r.Status, r.Body)
		}
	}
	if body == nil {
		t.Fatalf("%s: no request got the order", what)
	}
	if fresh != 1 {
		t.Fatalf("%s: %d responses were first executions, want 1", what, fresh)
	}
}

// twoReplicas starts two `tekrar serve` processes on one fresh database and returns the
// database's URL, a connection to it and the two servers' base URLs.
func twoReplicas(t *testing.T) (dbURL string, db *sqlx.DB, bases []string) {
	t.Helper()
	dbURL = dbtest.NewURL(t)
	db = openDB(t, dbURL)
	for _, port := range freePorts(t, 2) {
		_, base := startServe(t, dbURL, port, "TEKRAR_LOG_LEVEL=warn")
		bases = append(bases, base)
	}
	return dbURL, db, bases
}

// TestTwoServersOneDatabaseDuplicateStorm: two replicas share a database, and a retry storm
// spread over both still charges once per key, because the database decides every race.
func TestTwoServersOneDatabaseDuplicateStorm(t *testing.T) {
	t.Parallel()
	dbURL, db, bases := twoReplicas(t)
	secret := newClientSecret(t, dbURL, "storm app")
	c := newHTTPClient()

	body := orderJSONBody(9000, "tok_visa")
	rs := storm(t, 200, func(i int) (response, error) {
		return send(c, "POST", bases[i%2]+"/v1/orders", secret, body,
			"Idempotency-Key", "storm-one", "Prefer", "wait=10")
	})
	checkOneOutcome(t, "one key", rs)
	for table, want := range map[string]int{"orders": 1, "payments": 1, "psp_charges": 1, "idempotency_keys": 1} {
		if n := countRows(t, db, `SELECT count(*) FROM `+table); n != want {
			t.Errorf("%d rows in %s after one key's storm, want %d", n, table, want)
		}
	}
	if t.Failed() {
		return
	}

	const keys, copies = 100, 3
	rs = storm(t, keys*copies, func(i int) (response, error) {
		k, copy := i%keys, i/keys
		return send(c, "POST", bases[(k+copy)%2]+"/v1/orders", secret, orderJSONBody(int64(1000+k), "tok_visa"),
			"Idempotency-Key", fmt.Sprintf("storm-many-%d", k), "Prefer", "wait=10")
	})
	for k := range keys {
		var group []response
		for copy := range copies {
			group = append(group, rs[copy*keys+k])
		}
		checkOneOutcome(t, fmt.Sprintf("key %d", k), group)
	}
	for table, want := range map[string]int{"orders": 1 + keys, "payments": 1 + keys, "psp_charges": 1 + keys} {
		if n := countRows(t, db, `SELECT count(*) FROM `+table); n != want {
			t.Errorf("%d rows in %s after %d keys' storm, want %d", n, table, keys, want)
		}
	}
	// Each order was charged its own amount.
	if n := countRows(t, db, `SELECT count(*) FROM orders o JOIN payments p ON p.order_id = o.id
		JOIN psp_charges c ON c.id = p.provider_charge_id WHERE c.amount = o.amount`); n != 1+keys {
		t.Errorf("%d orders were charged their own amount, want %d", n, 1+keys)
	}
}
