package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

func refund(e *apptest.Env, secret, orderID, key string, amount int64) (apptest.Response, error) {
	return e.Send("POST", "/v1/orders/"+orderID+"/refunds", secret,
		[]byte(fmt.Sprintf(`{"amount":%d,"reason":"customer asked"}`, amount)), "Idempotency-Key", key)
}

func paidOrder(t *testing.T, e *apptest.Env, key string, amount int64) string {
	t.Helper()
	r := postOrder(t, e, e.Secret, key, orderBody(amount, "tok_visa"))
	if r.Status != 201 {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	return decodeOrder(t, r).ID
}

func TestRefund(t *testing.T) {
	e := apptest.New(t)
	id := paidOrder(t, e, "k-order", 9000)
	r, err := refund(e, e.Secret, id, "k-refund-1", 4500)
	if err != nil || r.Status != 201 {
		t.Fatalf("refund: %d %s %v", r.Status, r.Body, err)
	}
	var v struct {
		ID       string `json:"id"`
		OrderID  string `json:"order_id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil || v.OrderID != id || !strings.HasPrefix(v.ID, "rf_") || v.Amount != 4500 || v.Currency != "TRY" || v.Status != "succeeded" {
		t.Fatalf("refund body %s", r.Body)
	}
	again, _ := refund(e, e.Secret, id, "k-refund-1", 4500)
	if again.Status != 201 || !bytes.Equal(again.Body, r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("refund replay: %d %s", again.Status, again.Body)
	}
	over, _ := refund(e, e.Secret, id, "k-refund-2", 4501)
	advice(t, problemOf(t, over, 422, "refund_exceeds_captured"), false, true)
	if n := count(t, e, `SELECT refunded_amount FROM orders WHERE public_id = $1`, id); n != 4500 {
		t.Fatalf("refunded_amount %d", n)
	}
	if n := count(t, e, `SELECT coalesce(sum(amount), 0) FROM psp_refunds`); n != 4500 {
		t.Fatalf("provider refunded %d", n)
	}
	g := e.Do(t, "GET", "/v1/orders/"+id, e.Secret, nil)
	if !bytes.Contains(g.Body, []byte(`"refunded_amount":4500`)) {
		t.Fatalf("order after refund: %s", g.Body)
	}
}

func TestRefundRefusals(t *testing.T) {
	e := apptest.New(t)
	other, _ := e.NewClient(t, "other")
	id := paidOrder(t, e, "k-order", 9000)
	declined := postOrder(t, e, e.Secret, "k-declined", orderBody(9000, "tok_declined"))
	var dp struct {
		OrderID string `json:"order_id"`
	}
	_ = json.Unmarshal(declined.Body, &dp)

	r, _ := refund(e, other, id, "k-x", 100)
	advice(t, problemOf(t, r, 404, "order_not_found"), false, true)
	r, _ = refund(e, e.Secret, "ord_"+strings.Repeat("0", 32), "k-y", 100)
	problemOf(t, r, 404, "order_not_found")
	r, _ = refund(e, e.Secret, dp.OrderID, "k-z", 100)
	problemOf(t, r, 409, "order_not_refundable")
	r, _ = refund(e, e.Secret, id, "k-w", 0)
	problemOf(t, r, 422, "validation_failed")
	// Postgres's text cannot hold U+0000: a field error, not a 500.
	r = e.Do(t, "POST", "/v1/orders/"+id+"/refunds", e.Secret, []byte(`{"amount":100,"reason":"a\u0000b"}`),
		"Idempotency-Key", "k-nul")
	if p := problemOf(t, r, 422, "validation_failed"); !strings.Contains(string(r.Body), `"field":"reason"`) {
		t.Fatalf("NUL in the reason: %v", p)
	}
	if n := count(t, e, `SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds", n)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE refund_id IS NOT NULL`); n != 0 {
		t.Fatalf("a refused refund stored its key")
	}
}

func TestRefundStormOneKey(t *testing.T) {
	e := apptest.New(t)
	id := paidOrder(t, e, "k-order", 9000)
	rs := storm(t, 100, func(int) (apptest.Response, error) { return refund(e, e.Secret, id, "k-refund", 3000) })
	checkOneOutcome(t, rs)
	if n := count(t, e, `SELECT count(*) FROM refunds`); n != 1 {
		t.Fatalf("%d refunds", n)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_refunds`); n != 1 {
		t.Fatalf("%d provider refunds", n)
	}
	if n := count(t, e, `SELECT refunded_amount FROM orders WHERE public_id = $1`, id); n != 3000 {
		t.Fatalf("refunded_amount %d", n)
	}
}

// Concurrent refunds under different keys can never exceed the capture: the database
// refuses the one too many, whatever the interleaving.
func TestConcurrentOverRefund(t *testing.T) {
	e := apptest.New(t)
	id := paidOrder(t, e, "k-order", 9000)
	rs := storm(t, 30, func(i int) (apptest.Response, error) {
		return refund(e, e.Secret, id, fmt.Sprintf("k-part-%d", i), 1000)
	})
	ok := 0
	for _, r := range rs {
		switch r.Status {
		case 201:
			ok++
		default:
			problemOf(t, r, 422, "refund_exceeds_captured")
		}
	}
	if ok != 9 {
		t.Fatalf("%d refunds of 1000 succeeded on a 9000 order, want 9", ok)
	}
	if n := count(t, e, `SELECT coalesce(sum(amount), 0) FROM refunds WHERE status = 'succeeded'`); n != 9000 {
		t.Fatalf("refunded %d", n)
	}
	if n := count(t, e, `SELECT coalesce(sum(amount), 0) FROM psp_refunds`); n != 9000 {
		t.Fatalf("provider refunded %d", n)
	}
}
