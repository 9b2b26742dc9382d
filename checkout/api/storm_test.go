package api_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// storm sends n requests at once and returns their responses.
func storm(t *testing.T, n int, send func(i int) (apptest.Response, error)) []apptest.Response {
	t.Helper()
	out := make([]apptest.Response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = send(i)
		}()
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

// checkOneOutcome asserts that every 201 carries the same body and that everything else
// is a 409 in-use answer, never a second execution.
func checkOneOutcome(t *testing.T, rs []apptest.Response) (created int) {
	t.Helper()
	var body []byte
	fresh := 0
	for i, r := range rs {
		switch r.Status {
		case 201:
			created++
			if body == nil {
				body = r.Body
			} else if !bytes.Equal(body, r.Body) {
				t.Fatalf("response %d differs:\n%s\n%s", i, r.Body, body)
			}
			if r.Header.Get("Idempotent-Replayed") == "false" {
				fresh++
			}
		case 409:
			problemOf(t, r, 409, "idempotency_key_in_use")
		default:
			t.Fatalf("response %d: %d %s", i, r.Status, r.Body)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d responses were first executions, want 1", fresh)
	}
	return created
}

func TestDuplicateStormOneKey(t *testing.T) {
	for _, wait := range []string{"", "wait=10"} {
		t.Run("prefer "+wait, func(t *testing.T) {
			e := apptest.New(t)
			body := orderBody(9000, "tok_visa")
			rs := storm(t, 200, func(int) (apptest.Response, error) {
				return e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "storm", "Prefer", wait)
			})
			created := checkOneOutcome(t, rs)
			if wait != "" && created != len(rs) {
				t.Errorf("with Prefer: wait, %d of %d got the order", created, len(rs))
			}
			if n := count(t, e, `SELECT count(*) FROM orders`); n != 1 {
				t.Fatalf("%d orders", n)
			}
			if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
				t.Fatalf("%d provider charges", n)
			}
			if n := count(t, e, `SELECT count(*) FROM payments`); n != 1 {
				t.Fatalf("%d payments", n)
			}
		})
	}
}

func TestDuplicateStormManyKeys(t *testing.T) {
	e := apptest.New(t)
	const keys, copies = 100, 4
	rs := storm(t, keys*copies, func(i int) (apptest.Response, error) {
		return e.Send("POST", "/v1/orders", e.Secret, orderBody(int64(1000+i%keys), "tok_visa"),
			"Idempotency-Key", fmt.Sprintf("many-%d", i%keys), "Prefer", "wait=10")
	})
	for k := 0; k < keys; k++ {
		var group []apptest.Response
		for c := 0; c < copies; c++ {
			group = append(group, rs[c*keys+k])
		}
		checkOneOutcome(t, group)
	}
	if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != keys {
		t.Fatalf("%d orders, want %d", n, keys)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != keys {
		t.Fatalf("%d charges, want %d", n, keys)
	}
	// Every order was charged exactly its own amount.
	if n := count(t, e, `SELECT count(*) FROM orders o JOIN psp_charges c ON c.id = (SELECT provider_charge_id FROM payments WHERE order_id = o.id) WHERE c.amount = o.amount`); n != keys {
		t.Fatalf("%d orders charged their amount, want %d", n, keys)
	}
}

// TestMixedStormOneKey sends one key at once with three different requests: an order, the
// same order for another amount, and a refund of an earlier order. Whichever request claims
// the key first is the only one executed; every copy of it gets its answer, and every
// other request is refused as a reuse of the key, with nothing charged or refunded for it.
func TestMixedStormOneKey(t *testing.T) {
	for run := 0; run < 4; run++ {
		t.Run(fmt.Sprint("run ", run), func(t *testing.T) {
			e := apptest.New(t)
			base := decodeOrder(t, postOrder(t, e, e.Secret, "base", orderBody(9000, "tok_visa")))
			type request struct {
				name, path string
				body       []byte
			}
			requests := []request{
				{"order", "/v1/orders", orderBody(5000, "tok_visa")},
				{"other amount", "/v1/orders", orderBody(5100, "tok_visa")},
				{"refund", "/v1/orders/" + base.ID + "/refunds", []byte(`{"amount":100}`)},
			}
			const copies = 40
			rs := storm(t, copies*len(requests), func(i int) (apptest.Response, error) {
				// Each run rotates which request the first goroutines send.
				rq := requests[(i+run)%len(requests)]
				return e.Send("POST", rq.path, e.Secret, rq.body, "Idempotency-Key", "mixed", "Prefer", "wait=10")
			})
			winner := -1
			for i, r := range rs {
				if r.Status == 201 && r.Header.Get("Idempotent-Replayed") == "false" {
					if winner >= 0 {
						t.Fatalf("requests %d and %d were both executed", winner, i)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatal("no request was executed")
			}
			won := requests[(winner+run)%len(requests)]
			t.Logf("executed: %s", won.name)
			for i, r := range rs {
				rq := requests[(i+run)%len(requests)]
				if rq.name == won.name {
					if r.Status != 201 || !bytes.Equal(r.Body, rs[winner].Body) {
						t.Fatalf("copy %d of the executed %s: %d %s", i, won.name, r.Status, r.Body)
					}
					continue
				}
				advice(t, problemOf(t, r, 422, "idempotency_key_reused"), false, false)
			}
			orders, charges, refunds := 1, 1, 0
			if won.name == "refund" {
				refunds = 1
			} else {
				orders, charges = 2, 2
			}
			for _, c := range []struct {
				query string
				want  int
			}{
				{`SELECT count(*) FROM orders`, orders},
				{`SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`, charges},
				{`SELECT count(*) FROM payments`, charges},
				{`SELECT count(*) FROM refunds`, refunds},
				{`SELECT count(*) FROM psp_refunds`, refunds},
				{`SELECT count(*) FROM idempotency_keys WHERE key = 'mixed'`, 1},
			} {
				if n := count(t, e, c.query); n != c.want {
					t.Errorf("%s: %d, want %d (executed: %s)", c.query, n, c.want, won.name)
				}
			}
			if won.name == "other amount" {
				if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE amount = 5100`); n != 1 {
					t.Errorf("%d charges of 5100", n)
				}
			}
		})
	}
}
