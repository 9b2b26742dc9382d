package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// FuzzCreateOrder sends POST /v1/orders any body and key against a real database. Whatever
// arrives, the answer is never a 500: it is an order, or a problem with a code. `go test`
// runs the seeds; `go test -fuzz FuzzCreateOrder ./checkout/api/` explores.
func FuzzCreateOrder(f *testing.F) {
	for _, seed := range []struct{ key, body string }{
		{"k", string(orderBody(9000, "tok_visa"))},
		{"k", string(orderBody(9000, "tok_declined"))},
		{`"quoted"`, `{"currency":"TRY","items":[{"sku":"A","name":"\u0000","quantity":1,"unit_amount":1}],"amount":1,"payment":{"card_token":"tok_visa"}}`},
		{"k", `{"currency":"TRY","items":[{"sku":"A","name":"a","quantity":1e3,"unit_amount":-0}],"amount":1e400,"payment":{}}`},
		{"k", `{"metadata":{"":""},"customer":{"email":"a@b"}}`},
		{"k", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]"},
		{"k", "\xff\xfe{}"},
		{"", `{}`},
		{strings.Repeat("k", 256), `{}`},
	} {
		f.Add(seed.key, []byte(seed.body))
	}
	e := apptest.New(f)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		// Each input is its own intent: a fresh key unless the input's own is invalid.
		if key != "" && !strings.HasPrefix(key, `"`) {
			key = key + "-" + strconv.FormatInt(n.Add(1), 10)
		}
		r, err := e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", key)
		if err != nil {
			return // the client refused to send it (an invalid header value)
		}
		switch {
		case r.Status == 201:
			var o struct{ Status string }
			if err := json.Unmarshal(r.Body, &o); err != nil || o.Status != "paid" {
				t.Fatalf("201 without a paid order: %s", r.Body)
			}
		case r.Status >= 400:
			var p struct{ Code string }
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") ||
				json.Unmarshal(r.Body, &p) != nil || p.Code == "" {
				t.Fatalf("%d %q without a problem: %s", r.Status, ct, r.Body)
			}
			if r.Status >= 500 && p.Code != "payment_pending" {
				t.Fatalf("%d %s for key %q body %q", r.Status, r.Body, key, body)
			}
		default:
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
	})
}
