package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// startFloor serves the floor on a fresh test database, its tables in a schema of their own
// (the database has tekrar's tables of the same names in public), and returns its URL and a
// pool whose search_path finds the floor's tables first.
func startFloor(t *testing.T) (string, *sqlx.DB) {
	t.Helper()
	const schema = "floor"
	dbURL := dbtest.NewURL(t)
	f, err := newFloor(context.Background(), floorConfig{dbURL: dbURL, schema: schema, maxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close) // registered after f.close, so it stops before the floor's pool closes
	u, err := withSearchPath(dbURL, schema)
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, dbtest.Connect(t, u)
}

// floorRows counts the design tables' rows.
type floorRows struct{ keys, completed, orders, paid, payments, charges int }

func countFloorRows(t *testing.T, db *sqlx.DB) floorRows {
	t.Helper()
	var n floorRows
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM idempotency_keys),
	       (SELECT count(*) FROM idempotency_keys WHERE status = 'completed' AND response_code = 201 AND locked_at IS NULL),
	       (SELECT count(*) FROM orders), (SELECT count(*) FROM orders WHERE status = 'paid'),
	       (SELECT count(*) FROM payments), (SELECT count(*) FROM psp_charges)`).
		Scan(&n.keys, &n.completed, &n.orders, &n.paid, &n.payments, &n.charges); err != nil {
		t.Fatal(err)
	}
	return n
}

// floorAnswer is what a test reads of an answer.
type floorAnswer struct {
	status   int
	replayed bool
	ctype    string
	body     []byte
}

// postOrder sends an order as the load tool does, with net/http's client so that the body
// can be read; key "" sends none. It returns an error rather than failing, so that
// goroutines can call it.
func postOrder(c *http.Client, base, key string, body []byte) (floorAnswer, error) {
	req, err := http.NewRequest("POST", base+orderPath, bytes.NewReader(body))
	if err != nil {
		return floorAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer s")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return floorAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return floorAnswer{resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", resp.Header.Get("Content-Type"), b}, err
}

// floorLinkedSQL counts the completed keys whose stored answer, order, charge and payment
// all belong together: the charge under the key's id, the payment under the charge's, the
// payment's order the answer's, the amount the one the load tool sent for the key (its key
// ends in n, its amount is 100 + n % 100000) on every row.
const floorLinkedSQL = `
SELECT count(*) FROM idempotency_keys k
  JOIN psp_charges c ON c.provider_key = 'tekrar-' || k.id
  JOIN payments p ON p.charge_id = 'ch_' || c.id
  JOIN orders o ON o.id = p.order_id
 WHERE k.status = 'completed' AND k.response_code = 201 AND k.locked_at IS NULL
   AND k.response_body = jsonb_build_object('order_id', o.id, 'status', 'paid', 'amount_minor', o.amount_minor, 'currency', 'TRY')
   AND o.scope = k.scope AND o.status = 'paid' AND o.currency = 'TRY' AND c.currency = 'TRY'
   AND o.amount_minor = 100 + split_part(k.key, '-', 3)::bigint % 100000
   AND c.amount_minor = o.amount_minor AND p.amount_minor = o.amount_minor
   AND c.status = 'succeeded' AND p.status = 'succeeded'`

// TestFloorFirstArrivals: 200 first arrivals with distinct keys from 32 connections of the
// load tool's own sender (conn.post) are each answered 201, not as replays, and leave 200
// completed keys, paid orders, charges and payments, each key's rows linked to it.
func TestFloorFirstArrivals(t *testing.T) {
	base, db := startFloor(t)
	target, err := newConn(base)
	if err != nil {
		t.Fatal(err)
	}
	l := &loader{target: *target, secret: "s", run: "first"}
	const n, workers = 200, 32
	var next atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := l.worker()
			defer c.close()
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				rep, err := l.send(c, i)
				got := fmt.Sprintf("%d replayed=%v", rep.status, rep.replayed)
				if err != nil {
					got = err.Error()
				}
				mu.Lock()
				statuses[got]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if statuses["201 replayed=false"] != n || len(statuses) != 1 {
		t.Fatalf("answers %v, want %d of 201 replayed=false", statuses, n)
	}
	if got, want := countFloorRows(t, db), (floorRows{n, n, n, n, n, n}); got != want {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	var linked int
	if err := db.Get(&linked, floorLinkedSQL); err != nil {
		t.Fatal(err)
	}
	if linked != n {
		t.Fatalf("%d keys with their own order, charge and payment, want %d", linked, n)
	}
}

// TestFloorCountsAsFirstArrivals: first mode's measuring loop (measure, with the loader's
// keys and bodies) counts every answer of the floor as a success, and every request it sent
// completed its key.
func TestFloorCountsAsFirstArrivals(t *testing.T) {
	base, db := startFloor(t)
	target, err := newConn(base)
	if err != nil {
		t.Fatal(err)
	}
	l := &loader{target: *target, secret: "s", run: "measure"}
	var seq atomic.Int64
	res := l.measure(4, 100*time.Millisecond, 500*time.Millisecond, func(int) int64 { return seq.Add(1) })
	if res.errors != 0 || len(res.lat) == 0 || res.statuses[201] != len(res.lat) {
		t.Fatalf("%d requests measured, %d errors, statuses %v: want only 201s", len(res.lat), res.errors, res.statuses)
	}
	n := countFloorRows(t, db)
	if n.keys < len(res.lat) || n != (floorRows{n.keys, n.keys, n.keys, n.keys, n.keys, n.keys}) {
		t.Fatalf("rows %+v after %d measured requests: want every key completed with its rows", n, len(res.lat))
	}
}

// TestFloorSameKeyAtOnce: 20 requests with the same key and body at once make one order,
// one charge and one payment; one is answered as the first arrival, the others as replays
// of its body or 409 while it is in progress; a repeat after completion is a replay with
// the first answer's bytes.
func TestFloorSameKeyAtOnce(t *testing.T) {
	base, db := startFloor(t)
	l := &loader{run: "same"}
	key, body := l.key(7), l.body(7)
	const n = 20
	answers := make([]floorAnswer, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i], errs[i] = postOrder(http.DefaultClient, base, key, body)
		}()
	}
	close(start)
	wg.Wait()
	var first []byte
	firsts, replays, conflicts := 0, 0, 0
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			t.Fatalf("request %d: %v", i, errs[i])
		case a.status == 201 && !a.replayed:
			firsts++
			first = a.body
		case a.status == 201:
			replays++
		case a.status == 409 && a.ctype == "application/problem+json":
			conflicts++
		default:
			t.Fatalf("request %d: %d replayed=%v %s", i, a.status, a.replayed, a.body)
		}
	}
	if firsts != 1 {
		t.Fatalf("%d first arrivals, %d replays, %d conflicts: want one first arrival", firsts, replays, conflicts)
	}
	for i, a := range answers {
		if a.status == 201 && (!bytes.Equal(a.body, first) || a.ctype != "application/json") {
			t.Errorf("request %d: %s %s, the first arrival's was application/json %s", i, a.ctype, a.body, first)
		}
	}
	t.Logf("%d replays, %d conflicts", replays, conflicts)

	again, err := postOrder(http.DefaultClient, base, key, body)
	if err != nil {
		t.Fatal(err)
	}
	if again.status != 201 || !again.replayed || !bytes.Equal(again.body, first) {
		t.Fatalf("repeat after completion: %d replayed=%v %s, want a replay of 201 %s", again.status, again.replayed, again.body, first)
	}
	if got, want := countFloorRows(t, db), (floorRows{1, 1, 1, 1, 1, 1}); got != want {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	var linked int
	if err := db.Get(&linked, floorLinkedSQL); err != nil || linked != 1 {
		t.Fatalf("%d linked keys (%v), want 1", linked, err)
	}
}

// TestFloorRefuses: what the floor refuses, it refuses with a problem document and without
// writing a row.
func TestFloorRefuses(t *testing.T) {
	base, db := startFloor(t)
	l := &loader{run: "refuse"}
	if a, err := postOrder(http.DefaultClient, base, l.key(1), l.body(1)); err != nil || a.status != 201 {
		t.Fatalf("the completed key: %+v %v", a, err)
	}
	before := countFloorRows(t, db)
	for _, c := range []struct {
		name, key string
		body      []byte
		want      int
	}{
		{"the same key with another body", l.key(1), l.body(2), 422},
		{"no key", "", l.body(3), 400},
		{"bad JSON", l.key(4), []byte(`{"amount":`), 400},
		{"no amount", l.key(5), []byte(`{"currency":"TRY"}`), 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := postOrder(http.DefaultClient, base, c.key, c.body)
			if err != nil {
				t.Fatal(err)
			}
			if a.status != c.want || a.replayed || a.ctype != "application/problem+json" || !strings.Contains(string(a.body), fmt.Sprint(c.want)) {
				t.Errorf("%d replayed=%v %s %s, want a %d problem", a.status, a.replayed, a.ctype, a.body, c.want)
			}
			if after := countFloorRows(t, db); after != before {
				t.Errorf("rows %+v, before %+v", after, before)
			}
		})
	}
}
