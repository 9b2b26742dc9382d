package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTwoServersMixedTraffic sends random traffic of two clients to two replicas at once:
// orders and refunds under a small pool of keys, retried through either server, with their
// JSON members in any order and any whitespace, sometimes with another request under the
// same key, sometimes with Prefer: wait. Afterwards every answer is checked against what
// the database holds: one key row and one execution per intent, every answer to it the
// stored one, every other request under its key refused, each order charged once for its
// own amount, refunds within the capture, and no answer naming the other client's orders.
//
// The traffic is random but reproducible: a failure prints its seed, and
// TEKRAR_TRAFFIC_SEED=<seed> runs the same choices again.
func TestTwoServersMixedTraffic(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TEKRAR_TRAFFIC_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TEKRAR_TRAFFIC_SEED: %v", err)
		}
	}
	t.Logf("seed %d (TEKRAR_TRAFFIC_SEED=%d reproduces the choices)", seed, seed)

	dbURL, db, bases := twoReplicas(t)
	c := newHTTPClient()

	// Each client has a paid order of 10,000 that its refund intents draw on: 1,500 each,
	// so at most six of its eight refund keys can succeed.
	const captured, refundAmount = 10000, 1500
	type client struct {
		secret string
		id     int64
		base   string // the order refunds draw on (its public id)
	}
	clients := make([]client, 2)
	for i := range clients {
		secret := newClientSecret(t, dbURL, fmt.Sprintf("traffic app %d", i))
		r := mustSend(t, c, "POST", bases[0]+"/v1/orders", secret, orderJSONBody(captured, "tok_visa"), "Idempotency-Key", "base")
		var o struct{ ID string }
		if r.Status != 201 || json.Unmarshal(r.Body, &o) != nil {
			t.Fatalf("base order: %d %s", r.Status, r.Body)
		}
		var id int64
		if err := db.Get(&id, `SELECT client_id FROM orders WHERE public_id = $1`, o.ID); err != nil {
			t.Fatal(err)
		}
		clients[i] = client{secret, id, o.ID}
	}

	// An intent is one thing a client means to do under one key; variant 1 is another
	// request under the same key (another amount), which must never run once variant 0 has,
	// and the other way round. Both clients use the same key names: each is its own key.
	type intent struct {
		client int
		refund bool
		key    string
		amount [2]int64
	}
	var intents []intent
	for ci := range clients {
		for k := range 20 {
			a := int64(1000 + 10*k)
			intents = append(intents, intent{ci, false, fmt.Sprintf("order-%d", k), [2]int64{a, a + 7}})
		}
		for k := range 8 {
			intents = append(intents, intent{ci, true, fmt.Sprintf("refund-%d", k), [2]int64{refundAmount, refundAmount + 100}})
		}
	}

	type sent struct {
		intent, variant int
		wait            bool
		r               response
	}
	const workers, perWorker = 24, 40
	results := make([][]sent, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			<-start
			for range perWorker {
				ii := rng.IntN(len(intents))
				in := intents[ii]
				variant := 0
				if rng.IntN(10) == 0 {
					variant = 1
				}
				wait := rng.IntN(2) == 0
				prefer := ""
				if wait {
					prefer = "wait=10"
				}
				cl := clients[in.client]
				path, body := "/v1/orders", shuffledJSON(rng, orderDoc(in.amount[variant]))
				if in.refund {
					path = "/v1/orders/" + cl.base + "/refunds"
					body = shuffledJSON(rng, map[string]any{"amount": in.amount[variant], "reason": "traffic"})
				}
				r, err := send(c, "POST", bases[rng.IntN(2)]+path, cl.secret, body,
					"Idempotency-Key", in.key, "Prefer", prefer)
				if err != nil {
					errs[w] = err
					return
				}
				results[w] = append(results[w], sent{ii, variant, wait, r})
			}
		})
	}
	close(start)
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}

	byIntent := make([][]sent, len(intents))
	mix := map[string]int{}
	for _, rs := range results {
		for _, s := range rs {
			label := problemCode(s.r.Body)
			if label == "" {
				label = "replayed=" + s.r.Header.Get("Idempotent-Replayed")
			}
			mix[fmt.Sprintf("%d %s", s.r.Status, label)]++
			if s.r.Status >= 500 {
				t.Fatalf("client %d key %q got %d: %s", intents[s.intent].client, intents[s.intent].key, s.r.Status, s.r.Body)
			}
			byIntent[s.intent] = append(byIntent[s.intent], s)
		}
	}

	t.Logf("answers: %v", mix)

	// Per intent: the key row, and every answer given under it.
	wantOrders := []int{1, 1}
	wantRefunds := []int{0, 0}
	refunded := []int64{0, 0}
	var ordersOf [2][]string
	for ii, in := range intents {
		ss := byIntent[ii]
		if len(ss) == 0 {
			continue
		}
		what := fmt.Sprintf("client %d key %q", in.client, in.key)
		var stored struct {
			Status int    `db:"response_status"`
			Body   []byte `db:"response_body"`
		}
		n := countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE client_id = $1 AND key = $2`, clients[in.client].id, in.key)
		if n > 1 {
			t.Fatalf("%s: %d key rows", what, n)
		}
		if n == 0 {
			// Only a refund the capture could not cover leaves no key: each of its requests
			// was refused before anything was stored.
			if !in.refund {
				t.Fatalf("%s: no key row after %d requests", what, len(ss))
			}
			for _, s := range ss {
				problemOf(t, s.r, 422, "refund_exceeds_captured")
			}
			continue
		}
		if err := db.Get(&stored, `SELECT response_status, response_body FROM idempotency_keys
			WHERE client_id = $1 AND key = $2 AND state = 'completed'`, clients[in.client].id, in.key); err != nil {
			t.Fatalf("%s: stored response: %v", what, err)
		}
		// The request that ran is among ours, so the stored variant has a 201.
		winner, fresh := -1, 0
		for _, s := range ss {
			if s.r.Status == 201 {
				if winner >= 0 && s.variant != winner {
					t.Fatalf("%s: both requests under the key got 201", what)
				}
				winner = s.variant
			}
		}
		if winner < 0 {
			t.Fatalf("%s: a stored key, and none of its %d requests got 201", what, len(ss))
		}
		for _, s := range ss {
			switch {
			case s.variant == winner && s.r.Status == 201:
				if !bytes.Equal(s.r.Body, stored.Body) || stored.Status != 201 {
					t.Fatalf("%s: answered %s, stored %d %s", what, s.r.Body, stored.Status, stored.Body)
				}
				if s.r.Header.Get("Idempotent-Replayed") == "false" {
					fresh++
				}
			case s.variant == winner:
				if s.wait {
					t.Fatalf("%s: a request that waited got %d %s", what, s.r.Status, s.r.Body)
				}
				problemOf(t, s.r, 409, "idempotency_key_in_use")
			default:
				// The other request under the key: refused as a reuse, or, for a refund
				// that came before the key was claimed, refused for want of capture.
				code := problemCode(s.r.Body)
				if s.r.Status != 422 || !(code == "idempotency_key_reused" || in.refund && code == "refund_exceeds_captured") {
					t.Fatalf("%s: the other request under the key got %d %s", what, s.r.Status, s.r.Body)
				}
			}
		}
		if fresh != 1 {
			t.Fatalf("%s: %d first executions, want 1", what, fresh)
		}
		var got struct {
			ID     string `json:"id"`
			Amount int64  `json:"amount"`
		}
		if err := json.Unmarshal(stored.Body, &got); err != nil {
			t.Fatalf("%s: stored body: %v", what, err)
		}
		if got.Amount != in.amount[0] && got.Amount != in.amount[1] {
			t.Fatalf("%s: stored amount %d is neither request's", what, got.Amount)
		}
		if in.refund {
			wantRefunds[in.client]++
			refunded[in.client] += got.Amount
		} else {
			wantOrders[in.client]++
			ordersOf[in.client] = append(ordersOf[in.client], got.ID)
		}
	}

	// The database agrees, client by client.
	for ci, cl := range clients {
		for _, c := range []struct {
			query string
			want  int
			args  []any
		}{
			{`SELECT count(*) FROM orders WHERE client_id = $1`, wantOrders[ci], nil},
			{`SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id WHERE o.client_id = $1`, wantOrders[ci], nil},
			{`SELECT count(*) FROM orders o JOIN payments p ON p.order_id = o.id JOIN psp_charges ch ON ch.id = p.provider_charge_id
			   WHERE o.client_id = $1 AND ch.amount = o.amount AND o.status IN ('paid', 'partially_refunded', 'refunded')`, wantOrders[ci], nil},
			{`SELECT count(*) FROM refunds WHERE client_id = $1 AND status = 'succeeded'`, wantRefunds[ci], nil},
			{`SELECT count(*) FROM psp_refunds pr JOIN refunds r ON r.provider_key = pr.key WHERE r.client_id = $1`, wantRefunds[ci], nil},
			{`SELECT count(*) FROM orders WHERE client_id = $1 AND public_id = $2 AND refunded_amount = $3`, 1, []any{cl.base, refunded[ci]}},
		} {
			if n := countRows(t, db, c.query, append([]any{cl.id}, c.args...)...); n != c.want {
				t.Errorf("client %d: %s: %d, want %d", ci, strings.Join(strings.Fields(c.query), " "), n, c.want)
			}
		}
		if refunded[ci] > captured {
			t.Errorf("client %d: refunded %d of %d captured", ci, refunded[ci], captured)
		}
		// Every order an answer named is the client's own.
		for _, id := range ordersOf[ci] {
			if n := countRows(t, db, `SELECT count(*) FROM orders WHERE public_id = $1 AND client_id = $2`, id, cl.id); n != 1 {
				t.Errorf("client %d was answered with order %s, not its own", ci, id)
			}
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != wantOrders[0]+wantOrders[1] {
		t.Errorf("%d provider charges for %d orders", n, wantOrders[0]+wantOrders[1])
	}
}

// orderDoc is an order of one item for amount, as a document shuffledJSON can write.
func orderDoc(amount int64) map[string]any {
	return map[string]any{
		"currency": "TRY",
		"items":    []any{map[string]any{"sku": "A", "name": "A", "quantity": int64(1), "unit_amount": amount}},
		"amount":   amount,
		"payment":  map[string]any{"card_token": "tok_visa"},
		"customer": map[string]any{"id": "cus_1", "email": "a@example.com"},
	}
}

// shuffledJSON writes v with its object members in a random order and random whitespace
// between tokens: the same request, as far as the fingerprint is concerned.
func shuffledJSON(rng *rand.Rand, v any) []byte {
	var b bytes.Buffer
	ws := func() {
		b.WriteString([]string{"", "", " ", "\n  ", "\t"}[rng.IntN(5)])
	}
	var write func(v any)
	write = func(v any) {
		ws()
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				ws()
				kb, _ := json.Marshal(k)
				b.Write(kb)
				ws()
				b.WriteByte(':')
				write(v[k])
			}
			ws()
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				write(e)
			}
			b.WriteByte(']')
		default:
			eb, _ := json.Marshal(v)
			b.Write(eb)
		}
		ws()
	}
	write(v)
	return b.Bytes()
}
