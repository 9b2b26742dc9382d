package api_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// TestEveryLocationResolves: a created refund's Location named
// /v1/orders/{id}/refunds/{rid}, a route that did not exist, so a client that followed it
// got 404 not_found. Every Location a keyed POST answers (first time and on replay) is a
// GET of this API that answers 200 with the resource, a refund with the very body of its 201.
func TestEveryLocationResolves(t *testing.T) {
	e := apptest.New(t)
	order := postOrder(t, e, e.Secret, "k-order", orderBody(1000, "tok_visa"))
	o := decodeOrder(t, order)
	if order.Status != 201 || order.Header.Get("Location") != "/v1/orders/"+o.ID {
		t.Fatalf("order: %d Location %q", order.Status, order.Header.Get("Location"))
	}
	if g := e.Do(t, "GET", order.Header.Get("Location"), e.Secret, nil); g.Status != 200 || decodeOrder(t, g).ID != o.ID {
		t.Fatalf("GET the order's Location: %d %s", g.Status, g.Body)
	}
	if again := postOrder(t, e, e.Secret, "k-order", orderBody(1000, "tok_visa")); again.Header.Get("Location") != order.Header.Get("Location") {
		t.Fatalf("the replay's Location %q, the first %q", again.Header.Get("Location"), order.Header.Get("Location"))
	}

	var refunds [][]byte
	for i, body := range []string{`{"amount":300,"reason":"cold <latte>"}`, `{"amount":200}`} {
		key := []string{"k-refund-1", "k-refund-2"}[i]
		r := e.Do(t, "POST", "/v1/orders/"+o.ID+"/refunds", e.Secret, []byte(body), "Idempotency-Key", key)
		var ref struct{ ID string }
		if err := json.Unmarshal(r.Body, &ref); err != nil || r.Status != 201 ||
			r.Header.Get("Location") != "/v1/orders/"+o.ID+"/refunds/"+ref.ID {
			t.Fatalf("refund: %d %s Location %q", r.Status, r.Body, r.Header.Get("Location"))
		}
		again := e.Do(t, "POST", "/v1/orders/"+o.ID+"/refunds", e.Secret, []byte(body), "Idempotency-Key", key)
		if again.Header.Get("Idempotent-Replayed") != "true" || again.Header.Get("Location") != r.Header.Get("Location") {
			t.Fatalf("the replay: %s Location %q", again.Header.Get("Idempotent-Replayed"), again.Header.Get("Location"))
		}
		g := e.Do(t, "GET", r.Header.Get("Location"), e.Secret, nil)
		if g.Status != 200 || g.Header.Get("Content-Type") != "application/json; charset=utf-8" || !bytes.Equal(g.Body, r.Body) {
			t.Fatalf("GET %s: %d %s\nwant the 201's body %s", r.Header.Get("Location"), g.Status, g.Body, r.Body)
		}
		refunds = append(refunds, r.Body)
	}

	// The list: every refund of the order, oldest first, each as its GET shows it.
	list := e.Do(t, "GET", "/v1/orders/"+o.ID+"/refunds", e.Secret, nil)
	want := `{"data":[` + string(refunds[0]) + `,` + string(refunds[1]) + `]}`
	if list.Status != 200 || string(list.Body) != want {
		t.Fatalf("list: %d %s\nwant %s", list.Status, list.Body, want)
	}
	none := postOrder(t, e, e.Secret, "k-order-2", orderBody(500, "tok_visa"))
	if l := e.Do(t, "GET", "/v1/orders/"+decodeOrder(t, none).ID+"/refunds", e.Secret, nil); l.Status != 200 || string(l.Body) != `{"data":[]}` {
		t.Fatalf("list of an order without refunds: %d %s", l.Status, l.Body)
	}

	// Not found: another client's order is not found, as on GET /v1/orders/{id}; so is a
	// refund the order does not have, whoever's it is, and anything that is not an id.
	other, _ := e.NewClient(t, "other")
	var ref struct{ ID string }
	_ = json.Unmarshal(refunds[0], &ref)
	var internal string
	if err := e.DB.Get(&internal, `SELECT id::text FROM refunds WHERE public_id = $1`, ref.ID); err != nil {
		t.Fatal(err)
	}
	noneID := decodeOrder(t, none).ID
	for _, tc := range []struct{ name, secret, path, code string }{
		{"another-clients-order", other, "/v1/orders/" + o.ID + "/refunds/" + ref.ID, "order_not_found"},
		{"another-clients-list", other, "/v1/orders/" + o.ID + "/refunds", "order_not_found"},
		{"unknown-order", e.Secret, "/v1/orders/" + unknownOrder + "/refunds/" + ref.ID, "order_not_found"},
		{"unknown-order-list", e.Secret, "/v1/orders/" + unknownOrder + "/refunds", "order_not_found"},
		{"integer-order-list", e.Secret, "/v1/orders/1/refunds", "order_not_found"},
		{"unknown-refund", e.Secret, "/v1/orders/" + o.ID + "/refunds/rf_" + strings.Repeat("0", 32), "refund_not_found"},
		{"another-orders-refund", e.Secret, "/v1/orders/" + noneID + "/refunds/" + ref.ID, "refund_not_found"},
		{"internal-refund-id", e.Secret, "/v1/orders/" + o.ID + "/refunds/" + internal, "refund_not_found"},
		{"upper-case-refund-id", e.Secret, "/v1/orders/" + o.ID + "/refunds/" + strings.ToUpper(ref.ID), "refund_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := problemOf(t, e.Do(t, "GET", tc.path, tc.secret, nil), 404, tc.code)
			if _, ok := p["retryable"]; ok {
				t.Errorf("a read without a key got a keyed request's advice: %v", p)
			}
		})
	}
}
