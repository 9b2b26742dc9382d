package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/db"
)

// putProduct creates or replaces a product priced price TRY with stock units.
func putProduct(t testing.TB, e *apptest.Env, sku string, price, stock int64, headers ...string) apptest.Response {
	t.Helper()
	return e.Do(t, "PUT", "/v1/products/"+sku, e.Secret,
		[]byte(fmt.Sprintf(`{"name":"Espresso beans","price":%d,"currency":"TRY","stock":%d}`, price, stock)), headers...)
}

// stockOrderBody is an order of qty units of sku, from stock, at price each.
func stockOrderBody(sku string, qty, price int64) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":%q,"name":"Beans","quantity":%d,"unit_amount":%d,"from_stock":true}],
		"amount":%d,"payment":{"card_token":"tok_visa"}}`, sku, qty, price, qty*price))
}

func stockOf(t testing.TB, e *apptest.Env, sku string) int {
	t.Helper()
	return count(t, e, `SELECT stock FROM products WHERE sku = $1`, sku)
}

// checkLedger asserts that a product's movements add up to its level and that it had
// sales sales.
func checkLedger(t testing.TB, e *apptest.Env, sku string, sales int) {
	t.Helper()
	sum := count(t, e, `SELECT coalesce(sum(m.delta), 0) FROM stock_movements m JOIN products p ON p.id = m.product_id WHERE p.sku = $1`, sku)
	if level := stockOf(t, e, sku); sum != level {
		t.Fatalf("movements of %s add up to %d, level is %d", sku, sum, level)
	}
	n := count(t, e, `SELECT count(*) FROM stock_movements m JOIN products p ON p.id = m.product_id
		WHERE p.sku = $1 AND m.reason = 'sale'`, sku)
	if n != sales {
		t.Fatalf("%d sale movements of %s, want %d", n, sku, sales)
	}
}

// TestStockStormSellsTheLastUnitsOnce: 50 orders with distinct keys race, through two
// servers on one database, for the last 3 units: 3 are paid, 47 refused out_of_stock with
// nothing stored, and the level ends at 0 with one movement per sale.
func TestStockStormSellsTheLastUnitsOnce(t *testing.T) {
	e := apptest.New(t)
	peer := e.Peer(t)
	if r := putProduct(t, e, "BEANS", 1000, 3); r.Status != 201 {
		t.Fatalf("put product: %d %s", r.Status, r.Body)
	}
	const n = 50
	rs := storm(t, n, func(i int) (apptest.Response, error) {
		srv := []*apptest.Env{e, peer}[i%2]
		return srv.Send("POST", "/v1/orders", e.Secret, stockOrderBody("BEANS", 1, 1000), "Idempotency-Key", fmt.Sprintf("storm-%d", i))
	})
	paid := 0
	for _, r := range rs {
		switch r.Status {
		case 201:
			paid++
		default:
			p := problemOf(t, r, 409, "out_of_stock")
			advice(t, p, false, true)
			if p["sku"] != "BEANS" || p["available"] != float64(0) {
				t.Fatalf("out_of_stock problem %s", r.Body)
			}
		}
	}
	if paid != 3 {
		t.Fatalf("%d orders paid, want 3", paid)
	}
	if s := stockOf(t, e, "BEANS"); s != 0 {
		t.Fatalf("stock %d, want 0", s)
	}
	checkLedger(t, e, "BEANS", 3)
	for what, q := range map[string]string{
		"orders":           `SELECT count(*) FROM orders`,
		"keys":             `SELECT count(*) FROM idempotency_keys`,
		"provider charges": `SELECT count(*) FROM psp_charges`,
	} {
		if got := count(t, e, q); got != 3 {
			t.Fatalf("%d %s, want 3 (a refused order stores nothing)", got, what)
		}
	}
}

// TestStockReplayTakesOnce: a sold order's retries, one after and 100 at once through two
// servers, are replays: the stock is taken once.
func TestStockReplayTakesOnce(t *testing.T) {
	e := apptest.New(t)
	peer := e.Peer(t)
	putProduct(t, e, "BEANS", 1000, 10)
	body := stockOrderBody("BEANS", 2, 1000)
	first := postOrder(t, e, e.Secret, "once", body)
	if first.Status != 201 {
		t.Fatalf("order: %d %s", first.Status, first.Body)
	}
	rs := storm(t, 100, func(i int) (apptest.Response, error) {
		return []*apptest.Env{e, peer}[i%2].Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "once")
	})
	for i, r := range rs {
		if r.Status != 201 || !bytes.Equal(r.Body, first.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %d: %d %s", i, r.Status, r.Body)
		}
	}
	if s := stockOf(t, e, "BEANS"); s != 8 {
		t.Fatalf("stock %d, want 8", s)
	}
	// A new key sent 50 times at once: the claims race, the losers find the key taken (not
	// the stock short) and wait for the winner's answer.
	body = stockOrderBody("BEANS", 8, 1000)
	rs = storm(t, 50, func(i int) (apptest.Response, error) {
		return []*apptest.Env{e, peer}[i%2].Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "race", "Prefer", "wait=10")
	})
	for i, r := range rs {
		if r.Status != 201 || !bytes.Equal(r.Body, rs[0].Body) {
			t.Fatalf("racing request %d: %d %s", i, r.Status, r.Body)
		}
	}
	if s := stockOf(t, e, "BEANS"); s != 0 {
		t.Fatalf("stock %d, want 0", s)
	}
	checkLedger(t, e, "BEANS", 2)
}

// TestStockRefusals: each way an order's from_stock line can fail is answered with its
// own problem and stores nothing, the key included, so the same key goes through once the
// product allows it; free-form lines touch no product.
func TestStockRefusals(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 3)
	other, _ := e.NewClient(t, "other shop")

	r := postOrder(t, e, e.Secret, "k1", stockOrderBody("BEANS", 5, 1000))
	if p := problemOf(t, r, 409, "out_of_stock"); p["available"] != float64(3) {
		t.Fatalf("out_of_stock %s", r.Body)
	}
	r = postOrder(t, e, e.Secret, "k1", stockOrderBody("BEANS", 1, 999))
	if p := problemOf(t, r, 409, "price_mismatch"); p["price"] != float64(1000) || p["currency"] != "TRY" {
		t.Fatalf("price_mismatch %s", r.Body)
	}
	r = postOrder(t, e, e.Secret, "k1", stockOrderBody("TEA", 1, 1000))
	if p := problemOf(t, r, 404, "product_not_found"); p["sku"] != "TEA" {
		t.Fatalf("product_not_found %s", r.Body)
	}
	// Another client's sku is nobody's.
	r = e.Do(t, "POST", "/v1/orders", other, stockOrderBody("BEANS", 1, 1000), "Idempotency-Key", "k1")
	problemOf(t, r, 404, "product_not_found")
	// Two lines: the first could be taken, the second not; neither is.
	two := []byte(`{"currency":"TRY","items":[
		{"sku":"BEANS","name":"Beans","quantity":1,"unit_amount":1000,"from_stock":true},
		{"sku":"TEA","name":"Tea","quantity":1,"unit_amount":500,"from_stock":true}],
		"amount":1500,"payment":{"card_token":"tok_visa"}}`)
	problemOf(t, postOrder(t, e, e.Secret, "k2", two), 404, "product_not_found")
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys`) + count(t, e, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("refused orders stored %d rows", n)
	}
	if s := stockOf(t, e, "BEANS"); s != 3 {
		t.Fatalf("stock %d after refusals, want 3", s)
	}
	// A free-form line of the same sku is not a sale of the product.
	if r := postOrder(t, e, e.Secret, "free", orderBody2(1000, 1000)); r.Status != 201 {
		t.Fatalf("free-form order: %d %s", r.Status, r.Body)
	}
	// The refused key is free: once restocked, it sells.
	putProduct(t, e, "BEANS", 1000, 5)
	if r := postOrder(t, e, e.Secret, "k1", stockOrderBody("BEANS", 5, 1000)); r.Status != 201 {
		t.Fatalf("order after restock: %d %s", r.Status, r.Body)
	}
	if s := stockOf(t, e, "BEANS"); s != 0 {
		t.Fatalf("stock %d, want 0", s)
	}
	checkLedger(t, e, "BEANS", 1)
}

// TestStockCheckRefusesNegative: the CHECK is the last line of defence.
func TestStockCheckRefusesNegative(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 1)
	_, err := e.DB.ExecContext(context.Background(), `UPDATE products SET stock = stock - 2`)
	if !db.IsCheckViolation(err, "products_stock_not_negative") {
		t.Fatalf("UPDATE to a negative level: %v", err)
	}
	if s := stockOf(t, e, "BEANS"); s != 1 {
		t.Fatalf("stock %d", s)
	}
}

type productJSON struct {
	SKU     string `json:"sku"`
	Name    string `json:"name"`
	Price   int64  `json:"price"`
	Stock   int64  `json:"stock"`
	Version int64  `json:"version"`
}

func decodeProduct(t testing.TB, r apptest.Response) productJSON {
	t.Helper()
	var p productJSON
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("product body: %v: %s", err, r.Body)
	}
	return p
}

// TestPutProduct: the same body twice is one state with one ETag; a stale If-Match, an
// If-Match on nothing and If-None-Match: * on something are 412 and change nothing; a sale
// changes the ETag, so a correction read before it cannot undo it.
func TestPutProduct(t *testing.T) {
	e := apptest.New(t)
	other, _ := e.NewClient(t, "other shop")
	problemOf(t, putProduct(t, e, "BEANS", 1000, 3, "If-Match", `"1"`), 412, "precondition_failed")
	first := putProduct(t, e, "BEANS", 1000, 3, "If-None-Match", "*")
	if first.Status != 201 || first.Header.Get("ETag") != `"1"` || first.Header.Get("Location") != "/v1/products/BEANS" {
		t.Fatalf("create: %d %v %s", first.Status, first.Header, first.Body)
	}
	again := putProduct(t, e, "BEANS", 1000, 3)
	if again.Status != 200 || again.Header.Get("ETag") != `"1"` || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("same body again: %d %s %s", again.Status, again.Header.Get("ETag"), again.Body)
	}
	problemOf(t, putProduct(t, e, "BEANS", 1000, 3, "If-None-Match", "*"), 412, "precondition_failed")
	changed := putProduct(t, e, "BEANS", 1200, 4, "If-Match", `"1"`)
	if changed.Status != 200 || changed.Header.Get("ETag") != `"2"` {
		t.Fatalf("change: %d %s", changed.Status, changed.Body)
	}
	stale := putProduct(t, e, "BEANS", 1, 100, "If-Match", `"1"`)
	if p := problemOf(t, stale, 412, "precondition_failed"); p["etag"] != `"2"` {
		t.Fatalf("stale: %s", stale.Body)
	}
	problemOf(t, putProduct(t, e, "BEANS", 1, 100, "If-Match", `W/"2"`), 412, "precondition_failed")
	if r := postOrder(t, e, e.Secret, "sale", stockOrderBody("BEANS", 1, 1200)); r.Status != 201 {
		t.Fatalf("sale: %d %s", r.Status, r.Body)
	}
	problemOf(t, putProduct(t, e, "BEANS", 1200, 4, "If-Match", `"2"`), 412, "precondition_failed")
	g := e.Do(t, "GET", "/v1/products/BEANS", e.Secret, nil)
	if p := decodeProduct(t, g); g.Status != 200 || p.Price != 1200 || p.Stock != 3 || p.Version != 3 || g.Header.Get("ETag") != `"3"` {
		t.Fatalf("get: %d %s %s", g.Status, g.Header.Get("ETag"), g.Body)
	}
	// movements: put +3, put +1, sale -1
	if n := count(t, e, `SELECT count(*) FROM stock_movements`); n != 3 {
		t.Fatalf("%d movements, want 3", n)
	}
	checkLedger(t, e, "BEANS", 1)
	problemOf(t, e.Do(t, "GET", "/v1/products/BEANS", other, nil), 404, "product_not_found")
	l := e.Do(t, "GET", "/v1/products?limit=1", e.Secret, nil)
	if l.Status != 200 || !strings.Contains(string(l.Body), `"sku":"BEANS"`) {
		t.Fatalf("list: %d %s", l.Status, l.Body)
	}
	if r := e.Do(t, "GET", "/v1/products", other, nil); !strings.Contains(string(r.Body), `"data":[]`) {
		t.Fatalf("another client's list: %s", r.Body)
	}
	bad := e.Do(t, "PUT", "/v1/products/BEANS", e.Secret, []byte(`{"name":"","price":-1,"currency":"try","stock":-1}`))
	problemOf(t, bad, 422, "validation_failed")
}

func refundBody(amount int64, restock string) []byte {
	return []byte(fmt.Sprintf(`{"amount":%d%s}`, amount, restock))
}

// TestRestockOnce: a refund with restock puts the order's units back once, however many
// times and however concurrently it is sent; a second refund cannot put back what the
// first did.
func TestRestockOnce(t *testing.T) {
	e := apptest.New(t)
	peer := e.Peer(t)
	putProduct(t, e, "BEANS", 1000, 5)
	id := decodeOrder(t, postOrder(t, e, e.Secret, "sale", stockOrderBody("BEANS", 2, 1000))).ID
	if s := stockOf(t, e, "BEANS"); s != 3 {
		t.Fatalf("stock %d after sale", s)
	}
	body := refundBody(1000, `,"restock":true`)
	rs := storm(t, 30, func(i int) (apptest.Response, error) {
		return []*apptest.Env{e, peer}[i%2].Send("POST", "/v1/orders/"+id+"/refunds", e.Secret, body,
			"Idempotency-Key", "refund-1", "Prefer", "wait=10")
	})
	for i, r := range rs {
		if r.Status != 201 {
			t.Fatalf("refund %d: %d %s", i, r.Status, r.Body)
		}
	}
	if s := stockOf(t, e, "BEANS"); s != 5 {
		t.Fatalf("stock %d after the refund and its retries, want 5", s)
	}
	// Nothing is left to put back: an explicit quantity is refused, the whole order is none.
	over := e.Do(t, "POST", "/v1/orders/"+id+"/refunds", e.Secret,
		refundBody(500, `,"restock":true,"restock_items":[{"sku":"BEANS","quantity":1}]`), "Idempotency-Key", "refund-2")
	if p := problemOf(t, over, 422, "restock_exceeds_sold"); p["restockable"] != float64(0) {
		t.Fatalf("restock over: %s", over.Body)
	}
	if r := e.Do(t, "POST", "/v1/orders/"+id+"/refunds", e.Secret, refundBody(500, `,"restock":true`), "Idempotency-Key", "refund-2"); r.Status != 201 {
		t.Fatalf("second refund: %d %s", r.Status, r.Body)
	}
	if s := stockOf(t, e, "BEANS"); s != 5 {
		t.Fatalf("stock %d, want 5", s)
	}
	if n := count(t, e, `SELECT count(*) FROM stock_movements WHERE reason = 'refund'`); n != 1 {
		t.Fatalf("%d refund movements, want 1", n)
	}
	checkLedger(t, e, "BEANS", 1)
}

// TestRestockConcurrentRefunds: two refunds of one order with different keys race, each
// asking to put back both units sold: one does, the other is refused whole.
func TestRestockConcurrentRefunds(t *testing.T) {
	e := apptest.New(t)
	peer := e.Peer(t)
	putProduct(t, e, "BEANS", 1000, 2)
	id := decodeOrder(t, postOrder(t, e, e.Secret, "sale", stockOrderBody("BEANS", 2, 1000))).ID
	body := refundBody(1000, `,"restock":true,"restock_items":[{"sku":"BEANS","quantity":2}]`)
	rs := storm(t, 2, func(i int) (apptest.Response, error) {
		return []*apptest.Env{e, peer}[i].Send("POST", "/v1/orders/"+id+"/refunds", e.Secret, body, "Idempotency-Key", fmt.Sprintf("r-%d", i))
	})
	created := 0
	for _, r := range rs {
		if r.Status == 201 {
			created++
			continue
		}
		problemOf(t, r, 422, "restock_exceeds_sold")
	}
	if created != 1 {
		t.Fatalf("%d refunds restocked, want 1", created)
	}
	if s := stockOf(t, e, "BEANS"); s != 2 {
		t.Fatalf("stock %d, want 2", s)
	}
	if n := count(t, e, `SELECT count(*) FROM refunds`); n != 1 {
		t.Fatalf("%d refunds stored, want 1 (the refused one stores nothing)", n)
	}
	checkLedger(t, e, "BEANS", 1)
}

// A product PUT without its price or stock, or with either null, is 422 naming the member
// and changes nothing: it must not set the price or the level to 0.
func TestPutProductWithoutPriceOrStock(t *testing.T) {
	e := apptest.New(t)
	if r := putProduct(t, e, "BEANS", 1000, 3); r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	for _, tt := range []struct{ body, member string }{
		{`{"name":"Beans","currency":"TRY","stock":3}`, "price"},
		{`{"name":"Beans","price":null,"currency":"TRY","stock":3}`, "price"},
		{`{"name":"Beans","price":1000,"currency":"TRY"}`, "stock"},
		{`{"name":"Beans","price":1000,"currency":"TRY","stock":null}`, "stock"},
	} {
		r := e.Do(t, "PUT", "/v1/products/BEANS", e.Secret, []byte(tt.body))
		problemOf(t, r, 422, "validation_failed")
		if !strings.Contains(string(r.Body), `"field":"`+tt.member+`","message":"is required"`) {
			t.Errorf("%s: %s, want %s named as required", tt.body, r.Body, tt.member)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM products WHERE sku = 'BEANS' AND price = 1000 AND stock = 3 AND version = 1`); n != 1 {
		t.Error("a refused PUT changed the product")
	}
	if n := count(t, e, `SELECT count(*) FROM stock_movements`); n != 1 {
		t.Errorf("%d movements, want the creation's only", n)
	}
}
