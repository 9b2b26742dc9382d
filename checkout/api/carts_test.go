package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

func cartBody(qty int64) []byte {
	return []byte(fmt.Sprintf(`{"items":[{"sku":"BEANS","name":"Beans","quantity":%d,"unit_amount":1000,"from_stock":true}]}`, qty))
}

// cartOrderBody orders the cart id for amount.
func cartOrderBody(id string, amount int64) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","cart_id":%q,"amount":%d,"payment":{"card_token":"tok_visa"}}`, id, amount))
}

// TestPutCartConcurrentIfMatch: 20 PUTs of different contents, through two servers, all
// with the cart's current ETag: exactly one is applied, the others are 412, and the cart
// holds the winner's contents at version 2.
func TestPutCartConcurrentIfMatch(t *testing.T) {
	e := apptest.New(t)
	peer := e.Peer(t)
	first := e.Do(t, "PUT", "/v1/carts/till-1", e.Secret, cartBody(1))
	if first.Status != 201 || first.Header.Get("ETag") != `"1"` {
		t.Fatalf("create cart: %d %s", first.Status, first.Body)
	}
	same := e.Do(t, "PUT", "/v1/carts/till-1", e.Secret, cartBody(1), "If-Match", `"1"`)
	if same.Status != 200 || same.Header.Get("ETag") != `"1"` || !bytes.Equal(same.Body, first.Body) {
		t.Fatalf("same cart again: %d %s", same.Status, same.Body)
	}
	rs := storm(t, 20, func(i int) (apptest.Response, error) {
		return []*apptest.Env{e, peer}[i%2].Send("PUT", "/v1/carts/till-1", e.Secret, cartBody(int64(i+2)), "If-Match", `"1"`)
	})
	won := -1
	for i, r := range rs {
		switch r.Status {
		case 200:
			if won >= 0 {
				t.Fatalf("PUTs %d and %d both applied", won, i)
			}
			won = i
		default:
			problemOf(t, r, 412, "precondition_failed")
		}
	}
	if won < 0 {
		t.Fatal("no PUT applied")
	}
	g := e.Do(t, "GET", "/v1/carts/till-1", e.Secret, nil)
	var c struct {
		Items []struct {
			Quantity int64 `json:"quantity"`
		} `json:"items"`
		Amount  int64 `json:"amount"`
		Version int64 `json:"version"`
	}
	if err := json.Unmarshal(g.Body, &c); err != nil || c.Version != 2 || g.Header.Get("ETag") != `"2"` ||
		len(c.Items) != 1 || c.Items[0].Quantity != int64(won+2) || c.Amount != int64(won+2)*1000 {
		t.Fatalf("cart after the race (winner %d): %s", won, g.Body)
	}
	problemOf(t, e.Do(t, "DELETE", "/v1/carts/till-1", e.Secret, nil, "If-Match", `"1"`), 412, "precondition_failed")
	if r := e.Do(t, "DELETE", "/v1/carts/till-1", e.Secret, nil, "If-Match", `"2"`); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	problemOf(t, e.Do(t, "GET", "/v1/carts/till-1", e.Secret, nil), 404, "cart_not_found")
}

// TestCartOrderFingerprint: an order by cart_id takes the cart's items; its retry with the
// cart unchanged is a replay; with the cart changed, the same key is another request.
func TestCartOrderFingerprint(t *testing.T) {
	e := apptest.New(t)
	other, _ := e.NewClient(t, "other shop")
	putProduct(t, e, "BEANS", 1000, 10)
	e.Do(t, "PUT", "/v1/carts/c1", e.Secret, cartBody(2))
	first := postOrder(t, e, e.Secret, "cart-order", cartOrderBody("c1", 2000))
	if first.Status != 201 || !bytes.Contains(first.Body, []byte(`"quantity":2`)) || !bytes.Contains(first.Body, []byte(`"from_stock":true`)) {
		t.Fatalf("cart order: %d %s", first.Status, first.Body)
	}
	again := postOrder(t, e, e.Secret, "cart-order", cartOrderBody("c1", 2000))
	if again.Status != 201 || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	e.Do(t, "PUT", "/v1/carts/c1", e.Secret, cartBody(3))
	advice(t, problemOf(t, postOrder(t, e, e.Secret, "cart-order", cartOrderBody("c1", 3000)), 422, "idempotency_key_reused"), false, false)
	// The old body no longer adds up against the cart as it is: refused before the key is
	// looked at, as any invalid body is.
	problemOf(t, postOrder(t, e, e.Secret, "cart-order", cartOrderBody("c1", 2000)), 422, "validation_failed")
	if s := stockOf(t, e, "BEANS"); s != 8 {
		t.Fatalf("stock %d, want 8", s)
	}
	// The amount is checked against the cart as it is.
	problemOf(t, postOrder(t, e, e.Secret, "cart-order-2", cartOrderBody("c1", 2000)), 422, "validation_failed")
	if r := postOrder(t, e, e.Secret, "cart-order-2", cartOrderBody("c1", 3000)); r.Status != 201 {
		t.Fatalf("second cart order: %d %s", r.Status, r.Body)
	}
	problemOf(t, postOrder(t, e, e.Secret, "cart-order-3", cartOrderBody("nope", 3000)), 404, "cart_not_found")
	problemOf(t, e.Do(t, "POST", "/v1/orders", other, cartOrderBody("c1", 3000), "Idempotency-Key", "x"), 404, "cart_not_found")
	both := []byte(`{"currency":"TRY","cart_id":"c1","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":1}],"amount":1,"payment":{"card_token":"tok_visa"}}`)
	problemOf(t, postOrder(t, e, e.Secret, "cart-order-4", both), 422, "validation_failed")
	if s := stockOf(t, e, "BEANS"); s != 5 {
		t.Fatalf("stock %d, want 5", s)
	}
}
