package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// orderBody is a valid POST /v1/orders body for amount*1 of one item.
func orderBody(amount int64, token string) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":%d}],
		"amount":%d,"payment":{"card_token":%q},"customer":{"id":"cus_42","email":"ayse@example.com"},
		"metadata":{"device_id":"dev-1"}}`, amount, amount, token))
}

// orderBody2 is an order whose amount is not the sum of its items.
func orderBody2(itemsSum, amount int64) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":%d}],
		"amount":%d,"payment":{"card_token":"tok_visa"}}`, itemsSum, amount))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// unknownOrder has the shape of an order's public id and is nobody's order.
var unknownOrder = "ord_" + strings.Repeat("0", 32)

// waitFor polls cond until it holds, failing after a generous deadline. It waits for
// asynchronous effects; it is never used to time anything.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func postOrder(t testing.TB, e *apptest.Env, secret, key string, body []byte, headers ...string) apptest.Response {
	t.Helper()
	return e.Do(t, "POST", "/v1/orders", secret, body, append([]string{"Idempotency-Key", key}, headers...)...)
}

// problemOf decodes a problem+json response and checks its status and code.
func problemOf(t testing.TB, r apptest.Response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.Body)
	}
	if p["code"] != code || p["status"] != float64(status) || p["type"] != "/problems/"+code || p["title"] == "" {
		t.Fatalf("problem %s, want code %s status %d", r.Body, code, status)
	}
	return p
}

// advice checks the retryable and safe_new_key members of a keyed problem.
func advice(t testing.TB, p map[string]any, retryable, safeNewKey bool) {
	t.Helper()
	if p["retryable"] != retryable || p["safe_new_key"] != safeNewKey {
		t.Fatalf("retryable=%v safe_new_key=%v, want %v %v (problem %v)", p["retryable"], p["safe_new_key"], retryable, safeNewKey, p)
	}
}

// count runs a COUNT query.
func count(t testing.TB, e *apptest.Env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.DB.GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

type orderJSON struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Payment  struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		CardLast4 string `json:"card_last4"`
	} `json:"payment"`
	Customer struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	} `json:"customer"`
	CreatedAt string `json:"created_at"`
}

func decodeOrder(t testing.TB, r apptest.Response) orderJSON {
	t.Helper()
	var o orderJSON
	if err := json.Unmarshal(r.Body, &o); err != nil {
		t.Fatalf("order body: %v: %s", err, r.Body)
	}
	if strings.Contains(string(r.Body), "tok_") {
		t.Fatalf("the card token leaked into the response: %s", r.Body)
	}
	return o
}
