package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// A reused key's history says what the refused request differed in, so that an operator
// can tell a changed amount from a changed card without the request body, which tekrar
// does not keep.
func TestConflictSaysWhatDiffered(t *testing.T) {
	e := apptest.New(t)
	send := func(path, key, body string) {
		t.Helper()
		e.Do(t, "POST", path, e.Secret, []byte(body), "Idempotency-Key", key)
	}
	differs := func(key string) []string {
		t.Helper()
		e.App.Service.FlushHistory()
		var detail []byte
		if err := e.DB.Get(&detail, `SELECT detail FROM key_events WHERE key = $1 AND kind = 'reused_conflict'
			ORDER BY id DESC LIMIT 1`, key); err != nil {
			t.Fatalf("conflict event of %s: %v", key, err)
		}
		var d struct{ Differs []string }
		if err := json.Unmarshal(detail, &d); err != nil {
			t.Fatal(err)
		}
		return d.Differs
	}
	order := func(amount int64, currency, token, customer string) string {
		return fmt.Sprintf(`{"currency":%q,"items":[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":%d}],
			"amount":%d,"payment":{"card_token":%q},"customer":{"id":%q}}`, currency, amount, amount, token, customer)
	}
	first := order(4500, "TRY", "tok_visa", "cus_1")
	send("/v1/orders", "k-diff", first)

	tests := []struct {
		name, path, body string
		want             []string
	}{
		{"amount", "/v1/orders", order(9000, "TRY", "tok_visa", "cus_1"),
			[]string{"amount: 45.00 TRY → 90.00 TRY", "items"}},
		{"currency", "/v1/orders", order(4500, "EUR", "tok_visa", "cus_1"),
			[]string{"currency: TRY → EUR", "amount: 45.00 TRY → 45.00 EUR"}},
		{"customer", "/v1/orders", order(4500, "TRY", "tok_visa", "cus_2"), []string{`customer id: "cus_1" → "cus_2"`}},
		{"card only", "/v1/orders", order(4500, "TRY", "tok_mastercard", "cus_1"),
			[]string{"card: a token of another card (or one the provider does not know)"}},
		{"route", "/v1/orders/" + unknownOrder + "/refunds", `{"amount":100}`, []string{"route: POST /v1/orders → POST /v1/orders/" + unknownOrder + "/refunds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do(t, "POST", tt.path, e.Secret, []byte(tt.body), "Idempotency-Key", "k-diff")
			if r.Status != 422 {
				t.Fatalf("reused key: %d %s", r.Status, r.Body)
			}
			if got := differs("k-diff"); !slices.Equal(got, tt.want) {
				t.Fatalf("differs %q, want %q", got, tt.want)
			}
		})
	}

	// A refund key reused with another amount or reason.
	var orderID string
	if err := e.DB.Get(&orderID, `SELECT o.public_id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id WHERE k.key = 'k-diff'`); err != nil {
		t.Fatal(err)
	}
	path := "/v1/orders/" + orderID + "/refunds"
	send(path, "k-rdiff", `{"amount":1000,"reason":"cold"}`)
	send(path, "k-rdiff", `{"amount":1500,"reason":"late"}`)
	if got, want := differs("k-rdiff"), []string{"amount: 10.00 TRY → 15.00 TRY", "reason"}; !slices.Equal(got, want) {
		t.Fatalf("refund differs %q, want %q", got, want)
	}
}
