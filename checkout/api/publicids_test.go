package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/db"
)

var (
	orderIDShape  = regexp.MustCompile(`^ord_[0-9a-f]{32}$`)
	refundIDShape = regexp.MustCompile(`^rf_[0-9a-f]{32}$`)
	// A JSON member or path segment that carries a bare integer id.
	numericID = regexp.MustCompile(`"(id|order_id|refund_id)":\d|/v1/orders/\d|/refunds/\d`)
)

// TestPublicIDsRevealNothing: order and refund ids come from sequences shared by every
// client, so an integer id let a client count the other clients' orders made between two
// of its own. Everything a client sees names orders and refunds by opaque random ids: the
// bodies, the Location headers, the stored responses that replays send, the problems; the
// paths take only those ids, and an internal integer id or another client's id is a 404
// problem, as an order that does not exist.
func TestPublicIDsRevealNothing(t *testing.T) {
	e := apptest.New(t)
	b, _ := e.NewClient(t, "b")
	c, _ := e.NewClient(t, "c")

	// Client A's orders, with other clients' orders made between each two of them.
	var mine []string
	for i := range 12 {
		r := postOrder(t, e, e.Secret, fmt.Sprintf("k-a-%d", i), orderBody(1000+int64(i), "tok_visa"))
		o := decodeOrder(t, r)
		if r.Status != 201 || !orderIDShape.MatchString(o.ID) || r.Header.Get("Location") != "/v1/orders/"+o.ID {
			t.Fatalf("order: %d id %q Location %q", r.Status, o.ID, r.Header.Get("Location"))
		}
		mine = append(mine, o.ID)
		for j, secret := range []string{b, c} {
			if r := postOrder(t, e, secret, fmt.Sprintf("k-%d-%d", j, i), orderBody(500, "tok_visa")); r.Status != 201 {
				t.Fatalf("another client's order: %d %s", r.Status, r.Body)
			}
		}
	}
	// The ids follow no order: twelve in a row sorted either way by chance is 2 in 12!.
	rev := slices.Clone(mine)
	slices.Reverse(rev)
	if slices.IsSorted(mine) || slices.IsSorted(rev) {
		t.Errorf("order ids sort in creation order: %v", mine)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(mine)))) != len(mine) {
		t.Errorf("two orders share an id: %v", mine)
	}
	// The database itself refuses two orders (or refunds) one id.
	if _, err := e.DB.Exec(`UPDATE orders SET public_id = $1 WHERE public_id = $2`, mine[0], mine[1]); !db.IsUniqueViolation(err, "orders_public_id_uq") {
		t.Errorf("two orders given one public id: %v", err)
	}

	// GET by the public id; an internal id, an unknown id or another client's is 404.
	var internal int64
	if err := e.DB.Get(&internal, `SELECT id FROM orders WHERE public_id = $1`, mine[0]); err != nil {
		t.Fatal(err)
	}
	if g := e.Do(t, "GET", "/v1/orders/"+mine[0], e.Secret, nil); g.Status != 200 || decodeOrder(t, g).ID != mine[0] {
		t.Fatalf("GET by public id: %d %s", g.Status, g.Body)
	}
	for _, tc := range []struct{ name, id, secret string }{
		{"internal-id", itoa(internal), e.Secret},
		{"internal-id-with-the-prefix", "ord_" + itoa(internal), e.Secret},
		{"unknown-id", unknownOrder, e.Secret},
		{"upper-case-id", strings.ToUpper(mine[0]), e.Secret},
		{"another-clients-id", mine[0], b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problemOf(t, e.Do(t, "GET", "/v1/orders/"+tc.id, tc.secret, nil), 404, "order_not_found")
			r := e.Do(t, "POST", "/v1/orders/"+tc.id+"/refunds", tc.secret, []byte(`{"amount":100}`),
				"Idempotency-Key", "k-refund-"+tc.name)
			advice(t, problemOf(t, r, 404, "order_not_found"), false, true)
		})
	}
	if n := count(t, e, `SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds made by refused requests", n)
	}

	// A refund by the order's public id: its own id is opaque too, and so is its Location.
	r := e.Do(t, "POST", "/v1/orders/"+mine[1]+"/refunds", e.Secret, []byte(`{"amount":100}`), "Idempotency-Key", "k-refund")
	var ref struct {
		ID      string `json:"id"`
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(r.Body, &ref); err != nil || r.Status != 201 || !refundIDShape.MatchString(ref.ID) || ref.OrderID != mine[1] ||
		r.Header.Get("Location") != "/v1/orders/"+mine[1]+"/refunds/"+ref.ID {
		t.Fatalf("refund: %d %s Location %q", r.Status, r.Body, r.Header.Get("Location"))
	}
	again := e.Do(t, "POST", "/v1/orders/"+mine[1]+"/refunds", e.Secret, []byte(`{"amount":100}`), "Idempotency-Key", "k-refund")
	if again.Status != 201 || !bytes.Equal(again.Body, r.Body) {
		t.Fatalf("refund replay: %d %s", again.Status, again.Body)
	}

	// A declined order's problem names it by its public id.
	declined := problemOf(t, postOrder(t, e, e.Secret, "k-declined", orderBody(900, "tok_declined")), 402, "payment_declined")
	if id, _ := declined["order_id"].(string); !orderIDShape.MatchString(id) {
		t.Fatalf("declined problem names order %v", declined["order_id"])
	}
	// The key's status names the order and the refund by their public ids.
	var ks struct {
		OrderID  string `json:"order_id"`
		RefundID string `json:"refund_id"`
	}
	if g := e.Do(t, "GET", "/v1/idempotency-keys/k-refund", e.Secret, nil); json.Unmarshal(g.Body, &ks) != nil || ks.RefundID != ref.ID || ks.OrderID != "" {
		t.Fatalf("key status of the refund: %s", g.Body)
	}

	// Whatever the clients were answered, or will be on a replay, holds no integer id.
	var stored []struct {
		Headers string `db:"response_headers"`
		Body    string `db:"response_body"`
	}
	if err := e.DB.Select(&stored, `SELECT response_headers::text AS response_headers, convert_from(response_body, 'UTF8') AS response_body
		FROM idempotency_keys WHERE state = 'completed'`); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 12*3+2 {
		t.Fatalf("%d stored responses", len(stored))
	}
	for _, s := range stored {
		if numericID.MatchString(s.Headers) || numericID.MatchString(s.Body) {
			t.Errorf("a stored response carries an integer id: %s %s", s.Headers, s.Body)
		}
	}
	list := e.Do(t, "GET", "/v1/orders?customer_id=cus_42&limit=3", e.Secret, nil)
	if list.Status != 200 || numericID.MatchString(string(list.Body)) || strings.Contains(string(list.Body), `"next_after":`+itoa(internal)) {
		t.Fatalf("list: %d %s", list.Status, list.Body)
	}
}
