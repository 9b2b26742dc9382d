package checkout

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

// testRoutes are the API's routes (api.Routes) as the domain's tests are told them; the
// API's own tests hold api.Routes to the fingerprints these tests pin.
var testRoutes = Routes{
	Order:      OrderSpec.On("POST", "/v1/orders"),
	Refund:     RefundSpec.On("POST", "/v1/orders/{id}/refunds"),
	RefundPath: func(orderID string) string { return "/v1/orders/" + orderID + "/refunds" },
}

// specSamples is a full body of each keyed route, every member set. A keyed operation
// added without a sample fails TestFingerprintSpecsCover.
var specSamples = map[string]struct {
	path, body string
	bound      string // "" for none
}{
	"POST /v1/orders": {"/v1/orders", `{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":2,"unit_amount":4500,"from_stock":true}],
		"amount":9000,"payment":{"card_token":"tok_visa_1"},"customer":{"id":"cus_42","email":"ayse@example.com"},
		"metadata":{"device_id":"d1"}}`, `[{"sku":"LATTE","name":"Latte","quantity":2,"unit_amount":4500}]`},
	"POST /v1/orders/{id}/refunds": {"/v1/orders/ord_00000000000000000000000000000001/refunds",
		`{"amount":1000,"reason":"cold","restock":true,"restock_items":[{"sku":"LATTE","quantity":1}]}`, ""},
}

// TestFingerprintSpecsCover checks each route's spec does what docs/fingerprints.md says
// of it: changing any member of a full body changes the scope fingerprint, except the
// members the spec excludes and its card token (whose value comes back instead); so does
// a member the API does not have yet (covered by default), what the body names by
// reference, and the concrete path (another order's refund).
func TestFingerprintSpecsCover(t *testing.T) {
	for _, spec := range []FingerprintSpec{testRoutes.Order, testRoutes.Refund} {
		route := spec.Method + " " + spec.Route
		t.Run(route, func(t *testing.T) {
			sample, ok := specSamples[route]
			if !ok {
				t.Fatalf("no sample body for %s", route)
			}
			var bound []byte
			if sample.bound != "" {
				bound = []byte(sample.bound)
			}
			base, token, err := spec.Scope(sample.path, []byte(sample.body), bound)
			if err != nil {
				t.Fatal(err)
			}
			if spec.CardToken != "" && token != "tok_visa_1" {
				t.Fatalf("card token %q taken out, want tok_visa_1", token)
			}
			if spec.Scoped() != (spec.CardToken != "" || len(spec.Excluded) > 0) {
				t.Fatal("Scoped() disagrees with the spec")
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(sample.body), &doc); err != nil {
				t.Fatal(err)
			}
			for _, p := range leafPaths(doc, "") {
				changed := withLeaf(t, sample.body, p)
				sum, tok, err := spec.Scope(sample.path, changed, bound)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				switch {
				case p == spec.CardToken:
					if sum != base || tok != "tok_other" {
						t.Errorf("%s: another token changed the scope (or was not taken out: %q)", p, tok)
					}
				case slices.Contains(spec.Excluded, p):
					if sum != base {
						t.Errorf("%s is excluded, yet changing it changed the scope", p)
					}
				case sum == base:
					t.Errorf("%s is covered, yet changing it left the scope as it was", p)
				}
			}
			others := map[string][32]byte{}
			var added map[string]any
			_ = json.Unmarshal([]byte(sample.body), &added)
			added["member_of_tomorrow"] = 1
			b, _ := json.Marshal(added)
			others["a new member"], _, _ = spec.Scope(sample.path, b, bound)
			others["another path"], _, _ = spec.Scope(sample.path+"x", []byte(sample.body), bound)
			if bound != nil {
				others["another bound"], _, _ = spec.Scope(sample.path, []byte(sample.body), []byte(`[]`))
			}
			for what, sum := range others {
				if sum == base {
					t.Errorf("%s left the scope as it was", what)
				}
			}
		})
	}
	if (FingerprintSpec{Method: "POST", Route: "/v1/elsewhere"}).Scoped() {
		t.Error("a spec that names nothing does not cover its whole body")
	}
}

// leafPaths lists the dotted paths of every scalar in doc, an array standing for its
// first element ("items.sku").
func leafPaths(v any, prefix string) []string {
	switch v := v.(type) {
	case map[string]any:
		var out []string
		for k, c := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = append(out, leafPaths(c, p)...)
		}
		sort.Strings(out)
		return out
	case []any:
		return leafPaths(v[0], prefix)
	default:
		return []string{prefix}
	}
}

// withLeaf returns body with the scalar at path changed (in the first element of arrays);
// a card token becomes "tok_other".
func withLeaf(t *testing.T, body, path string) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	names := strings.Split(path, ".")
	cur := doc
	for i, n := range names {
		if a, ok := cur.([]any); ok {
			cur = a[0]
		}
		m := cur.(map[string]any)
		if i < len(names)-1 {
			cur = m[n]
			continue
		}
		switch old := m[n].(type) {
		case string:
			m[n] = "tok_other"
			if !strings.HasPrefix(old, "tok_") {
				m[n] = old + "x"
			}
		case float64:
			m[n] = old + 1
		case bool:
			m[n] = !old
		default:
			t.Fatalf("%s: %T", path, old)
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scopeBenchBody is an order as a client sends it: its members out of order, nested
// objects (the first of keyed's canonical seeds).
const scopeBenchBody = `{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":2,"unit_amount":4500}],"amount":9000,"payment":{"card_token":"tok_visa"},"customer":{"id":"cus_42","email":"ayse@example.com"},"metadata":{"device_id":"d"}}`

// BenchmarkScopeFingerprint is what the scope costs a first order beyond its exact
// fingerprint (the card lookup at the provider aside), beside the exact fingerprint:
//
//	go test -run '^$' -bench 'ScopeFingerprint' ./checkout/
func BenchmarkScopeFingerprint(b *testing.B) {
	body := []byte(scopeBenchBody)
	spec := testRoutes.Order
	b.Run("exact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Fingerprint("POST", "/v1/orders", body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := spec.Scope("/v1/orders", body, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
