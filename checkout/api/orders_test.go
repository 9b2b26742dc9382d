package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

func TestFirstArrivalCreatesPaidOrder(t *testing.T) {
	e := apptest.New(t)
	r := postOrder(t, e, e.Secret, "k-first", orderBody(9000, "tok_visa"))
	if r.Status != http.StatusCreated {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	o := decodeOrder(t, r)
	if o.Status != "paid" || o.Amount != 9000 || o.Currency != "TRY" || o.Payment.Status != "succeeded" ||
		o.Payment.CardLast4 != "4242" || !strings.HasPrefix(o.Payment.ID, "ch_") || o.Customer.ID != "cus_42" {
		t.Fatalf("unexpected order %s", r.Body)
	}
	if loc := r.Header.Get("Location"); loc != "/v1/orders/"+o.ID {
		t.Errorf("Location %q", loc)
	}
	if r.Header.Get("Idempotent-Replayed") != "false" || r.Header.Get("Idempotency-Key") != "k-first" {
		t.Errorf("keyed headers: replayed=%q key=%q", r.Header.Get("Idempotent-Replayed"), r.Header.Get("Idempotency-Key"))
	}
	exp, err := time.Parse(time.RFC3339, r.Header.Get("Idempotency-Expires"))
	if err != nil || exp.Sub(time.Now()) < 23*time.Hour || exp.Sub(time.Now()) > 25*time.Hour {
		t.Errorf("Idempotency-Expires %q, want about 24h from now", r.Header.Get("Idempotency-Expires"))
	}
	// What the database holds: one paid order, its one payment, one charge at the provider,
	// and a completed key whose stored body is what was sent.
	if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'paid' AND captured_amount = 9000`); n != 1 {
		t.Errorf("%d paid orders", n)
	}
	if n := count(t, e, `SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id
		 WHERE o.public_id = $1 AND p.provider_charge_id = $2`, o.ID, o.Payment.ID); n != 1 {
		t.Errorf("%d payments", n)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Errorf("%d provider charges", n)
	}
	var stored []byte
	if err := e.DB.Get(&stored, `SELECT response_body FROM idempotency_keys WHERE key = 'k-first' AND state = 'completed'`); err != nil || !bytes.Equal(stored, r.Body) {
		t.Errorf("stored body %s (err %v), sent %s", stored, err, r.Body)
	}
	// GET shows the same order.
	g := e.Do(t, "GET", "/v1/orders/"+o.ID, e.Secret, nil)
	if g.Status != 200 || !bytes.Equal(bytes.TrimSpace(g.Body), r.Body) {
		t.Errorf("GET order: %d %s, want %s", g.Status, g.Body, r.Body)
	}
}

func TestReplayIsByteIdentical(t *testing.T) {
	e := apptest.New(t)
	first := postOrder(t, e, e.Secret, "k-replay", orderBody(9000, "tok_visa"))
	// The same intent with its JSON keys in another order and other whitespace.
	reordered := []byte(`{ "payment": {"card_token": "tok_visa"}, "metadata": {"device_id": "dev-1"}, "amount": 9000,
		"items": [{"unit_amount": 9000, "quantity": 1, "name": "Latte", "sku": "LATTE"}],
		"customer": {"email": "ayse@example.com", "id": "cus_42"}, "currency": "TRY" }`)
	for i, body := range [][]byte{orderBody(9000, "tok_visa"), reordered} {
		r := postOrder(t, e, e.Secret, "k-replay", body)
		if r.Status != first.Status || !bytes.Equal(r.Body, first.Body) || r.Header.Get("Location") != first.Header.Get("Location") {
			t.Fatalf("replay %d: %d %s, want %d %s", i, r.Status, r.Body, first.Status, first.Body)
		}
		if r.Header.Get("Idempotent-Replayed") != "true" || r.Header.Get("Idempotency-Expires") != first.Header.Get("Idempotency-Expires") {
			t.Fatalf("replay %d headers: %v", i, r.Header)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 1 {
		t.Errorf("%d orders after replays", n)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Errorf("%d charges after replays", n)
	}
	// Replays are recorded after the fact, in the key's history.
	e.App.Service.FlushHistory()
	if n := count(t, e, `SELECT count(*) FROM key_events WHERE key = 'k-replay' AND kind = 'replayed' AND status = 201`); n != 2 {
		t.Errorf("%d replayed events, want 2", n)
	}
}

func TestReusedKeyWithAnotherRequest(t *testing.T) {
	e := apptest.New(t)
	first := postOrder(t, e, e.Secret, "k-reuse", orderBody(9000, "tok_visa"))
	o := decodeOrder(t, first)
	tests := []struct {
		name, method, path string
		body               []byte
	}{
		{"another amount", "POST", "/v1/orders", orderBody(9001, "tok_visa")},
		{"another card", "POST", "/v1/orders", orderBody(9000, "tok_mastercard")},
		{"another endpoint", "POST", "/v1/orders/" + o.ID + "/refunds", []byte(`{"amount":100}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do(t, tt.method, tt.path, e.Secret, tt.body, "Idempotency-Key", "k-reuse")
			p := problemOf(t, r, 422, "idempotency_key_reused")
			advice(t, p, false, false)
		})
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 1 {
		t.Errorf("%d orders", n)
	}
	if n := count(t, e, `SELECT count(*) FROM refunds`); n != 0 {
		t.Errorf("%d refunds", n)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Errorf("%d charges", n)
	}
}

func TestKeysAreScopedToTheClient(t *testing.T) {
	e := apptest.New(t)
	other, _ := e.NewClient(t, "other app")
	a := postOrder(t, e, e.Secret, "shared-key", orderBody(9000, "tok_visa"))
	b := postOrder(t, e, other, "shared-key", orderBody(9000, "tok_visa"))
	if a.Status != 201 || b.Status != 201 || b.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("statuses %d %d, b replayed=%s", a.Status, b.Status, b.Header.Get("Idempotent-Replayed"))
	}
	oa, ob := decodeOrder(t, a), decodeOrder(t, b)
	if oa.ID == ob.ID {
		t.Fatal("two clients' identical keys shared an order")
	}
	// Each client's replay is its own response, never the other's.
	ra := postOrder(t, e, e.Secret, "shared-key", orderBody(9000, "tok_visa"))
	rb := postOrder(t, e, other, "shared-key", orderBody(9000, "tok_visa"))
	if !bytes.Equal(ra.Body, a.Body) || !bytes.Equal(rb.Body, b.Body) {
		t.Fatal("a replay crossed clients")
	}
	// And neither can read the other's order or key.
	if r := e.Do(t, "GET", "/v1/orders/"+oa.ID, other, nil); r.Status != 404 {
		t.Errorf("other client's GET order: %d", r.Status)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 2 {
		t.Errorf("%d orders", n)
	}
}

func TestKeyHeaderProblems(t *testing.T) {
	e := apptest.New(t)
	tests := []struct {
		name    string
		headers []string
		code    string
	}{
		{"missing", nil, "idempotency_key_missing"},
		{"empty", []string{"Idempotency-Key", ""}, "idempotency_key_invalid"},
		{"too long", []string{"Idempotency-Key", strings.Repeat("x", 256)}, "idempotency_key_invalid"},
		{"not ascii", []string{"Idempotency-Key", "sipariş-1"}, "idempotency_key_invalid"},
		{"sent twice", []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, "idempotency_key_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do(t, "POST", "/v1/orders", e.Secret, orderBody(9000, "tok_visa"), tt.headers...)
			p := problemOf(t, r, 400, tt.code)
			advice(t, p, false, true)
		})
	}
	// A quoted (RFC 8941) key is the same key as the bare one.
	a := postOrder(t, e, e.Secret, "k-quoted", orderBody(9000, "tok_visa"))
	b := postOrder(t, e, e.Secret, `"k-quoted"`, orderBody(9000, "tok_visa"))
	if a.Status != 201 || b.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(a.Body, b.Body) {
		t.Fatalf("quoted key did not replay: %d %s", b.Status, b.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 1 {
		t.Errorf("%d orders", n)
	}
}

// Requests refused before execution are not stored: the client fixes them and resends with
// the same key.
func TestRefusedRequestsAreNotStored(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.MaxBodyBytes = 2048 })
	valid := orderBody(9000, "tok_visa")
	with := func(old, new string) []byte {
		if !bytes.Contains(valid, []byte(old)) {
			t.Fatalf("the valid body has no %s", old)
		}
		return bytes.Replace(valid, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name    string
		body    []byte
		headers []string
		status  int
		code    string
		field   string // the field a validation error names, when checked
	}{
		{"amount is not the sum", orderBody2(9000, 8000), nil, 422, "validation_failed", "amount"},
		// Postgres's text and jsonb cannot hold U+0000: refused per field, not a 500.
		{"NUL in an item name", with(`"name":"Latte"`, `"name":"Lat\u0000te"`), nil, 422, "validation_failed", "items[0].name"},
		{"NUL in a SKU", with(`"sku":"LATTE"`, `"sku":"LA\u0000"`), nil, 422, "validation_failed", "items[0].sku"},
		{"NUL in the card token", with(`"card_token":"tok_visa"`, `"card_token":"tok_visa\u0000"`), nil, 422, "validation_failed", "payment.card_token"},
		{"NUL in the customer id", with(`"id":"cus_42"`, `"id":"cus\u0000"`), nil, 422, "validation_failed", "customer.id"},
		{"NUL in a metadata value", with(`"device_id":"dev-1"`, `"device_id":"\u0000"`), nil, 422, "validation_failed", "metadata.device_id"},
		{"NUL in a metadata key", with(`"device_id":"dev-1"`, `"dev\u0000":"dev-1"`), nil, 422, "validation_failed", "metadata"},
		{"not UTF-8", with(`"name":"Latte"`, "\"name\":\"Lat\xfe\xffte\""), nil, 400, "malformed_json", ""},
		{"bad currency", bytes.Replace(valid, []byte(`"TRY"`), []byte(`"try"`), 1), nil, 422, "validation_failed", "currency"},
		{"unknown field", bytes.Replace(valid, []byte(`"amount"`), []byte(`"amout"`), 1), nil, 422, "validation_failed", ""},
		// Names are matched byte for byte, and once: the fingerprint tells these apart from the
		// valid body, so accepting them would replay one order's response to another.
		{"a name in capitals", with(`"amount":9000`, `"AMOUNT":4500,"amount":9000`), nil, 422, "validation_failed", "AMOUNT"},
		{"a name folded by Unicode", with(`"sku":`, `"ſku":`), nil, 422, "validation_failed", "items[0].ſku"},
		{"a member twice", with(`"amount":9000`, `"amount":4500,"amount":9000`), nil, 400, "malformed_json", ""},
		{"a nested member twice", with(`"payment":{"card_token":"tok_visa"}`, `"payment":{"card_token":"tok_visa"},"payment":{"card_token":"tok_visa"}`), nil, 400, "malformed_json", ""},
		{"wrong type", bytes.Replace(valid, []byte(`"amount":9000`), []byte(`"amount":"9000"`), 1), nil, 422, "validation_failed", ""},
		{"malformed json", []byte(`{"currency":`), nil, 400, "malformed_json", ""},
		{"data after the document", append(bytes.Clone(valid), []byte(` {"amount":1}`)...), nil, 400, "malformed_json", ""},
		{"not JSON whitespace after it", append(bytes.Clone(valid), '\v'), nil, 400, "malformed_json", ""},
		{"too large", []byte(`{"metadata":{"x":"` + strings.Repeat("a", 4000) + `"}}`), nil, 413, "body_too_large", ""},
		{"wrong content type", valid, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "k-refused-" + strings.ReplaceAll(tt.name, " ", "-")
			h := append([]string{"Idempotency-Key", key}, tt.headers...)
			r := e.Do(t, "POST", "/v1/orders", e.Secret, tt.body, h...)
			p := problemOf(t, r, tt.status, tt.code)
			advice(t, p, false, true)
			if tt.field != "" {
				errs, _ := p["errors"].([]any)
				if len(errs) != 1 || errs[0].(map[string]any)["field"] != tt.field {
					t.Fatalf("errors %v, want one naming %s", p["errors"], tt.field)
				}
			}
			if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = $1`, key); n != 0 {
				t.Fatalf("a refused request stored its key")
			}
			// Fixed, the same key goes through.
			if r := postOrder(t, e, e.Secret, key, valid); r.Status != 201 {
				t.Fatalf("fixed request with the same key: %d %s", r.Status, r.Body)
			}
		})
	}
	// Validation lists the field.
	r := postOrder(t, e, e.Secret, "k-fields", orderBody2(9000, 8000))
	var p struct {
		Errors []struct{ Field, Message string } `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil || len(p.Errors) != 1 || p.Errors[0].Field != "amount" {
		t.Fatalf("field errors %s", r.Body)
	}
}

func TestDeclinedIsAStoredFinalOutcome(t *testing.T) {
	e := apptest.New(t)
	r := postOrder(t, e, e.Secret, "k-declined", orderBody(9000, "tok_declined"))
	p := problemOf(t, r, 402, "payment_declined")
	advice(t, p, false, true)
	orderID, ok := p["order_id"].(string)
	if !ok || !strings.HasPrefix(orderID, "ord_") {
		t.Fatalf("no order_id in %s", r.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM orders WHERE public_id = $1 AND status = 'declined' AND captured_amount = 0`, orderID); n != 1 {
		t.Fatal("order not declined")
	}
	again := postOrder(t, e, e.Secret, "k-declined", orderBody(9000, "tok_declined"))
	if again.Status != 402 || !bytes.Equal(again.Body, r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("declined replay: %d %s", again.Status, again.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Errorf("%d charge attempts at the provider", n)
	}
}

func TestProviderTimeoutResolvesOnRetry(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.ProviderTimeout = 200 * time.Millisecond })
	r := postOrder(t, e, e.Secret, "k-timeout", orderBody(9000, "tok_timeout"))
	p := problemOf(t, r, 503, "payment_pending")
	advice(t, p, true, false)
	if r.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	// The provider charged although it answered too late; the order waits.
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`); n != 1 {
		t.Fatalf("%d charges", n)
	}
	if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'pending'`); n != 1 {
		t.Fatalf("order not pending")
	}
	// The retry finds the charge instead of charging again.
	again := postOrder(t, e, e.Secret, "k-timeout", orderBody(9000, "tok_timeout"))
	if again.Status != 201 || decodeOrder(t, again).Status != "paid" {
		t.Fatalf("retry: %d %s", again.Status, again.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Fatalf("%d charges after retry", n)
	}
	if n := count(t, e, `SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments", n)
	}
}

func TestProviderFailureChargesNothing(t *testing.T) {
	e := apptest.New(t)
	for i := 0; i < 2; i++ {
		r := postOrder(t, e, e.Secret, "k-fail", orderBody(9000, "tok_fail"))
		advice(t, problemOf(t, r, 503, "payment_pending"), true, false)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 0 {
		t.Fatalf("%d charges", n)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'`); n != 1 {
		t.Fatalf("key not left in progress for a retry")
	}
}

func TestInFlightKey(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.SandboxSlowDelay = 1500 * time.Millisecond })
	body := orderBody(9000, "tok_slow")
	first := make(chan apptest.Response, 1)
	go func() {
		r, _ := e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "k-slow")
		first <- r
	}()
	waitFor(t, "first request to claim the key", func() bool {
		return count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-slow'`) == 1
	})
	busy := postOrder(t, e, e.Secret, "k-slow", body)
	p := problemOf(t, busy, 409, "idempotency_key_in_use")
	advice(t, p, true, false)
	if busy.Header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	// Another request under the key is refused as a reuse while the first runs, waiting or
	// not: its fingerprint is stored with the claim. (The refund names an order that does
	// not exist; the key is checked before the order is.)
	for _, prefer := range []string{"", "wait=10"} {
		other := postOrder(t, e, e.Secret, "k-slow", orderBody(9100, "tok_slow"), "Prefer", prefer)
		advice(t, problemOf(t, other, 422, "idempotency_key_reused"), false, false)
		refund := e.Do(t, "POST", "/v1/orders/"+unknownOrder+"/refunds", e.Secret, []byte(`{"amount":100}`),
			"Idempotency-Key", "k-slow", "Prefer", prefer)
		advice(t, problemOf(t, refund, 422, "idempotency_key_reused"), false, false)
	}
	waited := postOrder(t, e, e.Secret, "k-slow", body, "Prefer", "wait=10")
	f := <-first
	if f.Status != 201 || waited.Status != 201 || !bytes.Equal(f.Body, waited.Body) {
		t.Fatalf("first %d %s; waited %d %s", f.Status, f.Body, waited.Status, waited.Body)
	}
	if waited.Header.Get("Preference-Applied") != "wait=10" || waited.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("waited headers %v", waited.Header)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Errorf("%d charges", n)
	}
}

func TestExpiredKeyIsNotReplayed(t *testing.T) {
	e := apptest.New(t)
	if _, err := e.DB.Exec(`UPDATE clients SET key_ttl = interval '1 hour' WHERE id = $1`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	// A fresh client (not cached) so the new TTL is read.
	secret, id := e.NewClient(t, "short ttl")
	if _, err := e.DB.Exec(`UPDATE clients SET key_ttl = interval '1 hour' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	r := postOrder(t, e, secret, "k-ttl", orderBody(9000, "tok_visa"))
	exp, _ := time.Parse(time.RFC3339, r.Header.Get("Idempotency-Expires"))
	if d := time.Until(exp); d < 50*time.Minute || d > 70*time.Minute {
		t.Fatalf("Idempotency-Expires %s with a 1h TTL", r.Header.Get("Idempotency-Expires"))
	}
	e.Clock.Advance(59 * time.Minute)
	if again := postOrder(t, e, secret, "k-ttl", orderBody(9000, "tok_visa")); again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay before expiry: %d", again.Status)
	}
	e.Clock.Advance(2 * time.Minute)
	late := postOrder(t, e, secret, "k-ttl", orderBody(9000, "tok_visa"))
	p := problemOf(t, late, 422, "idempotency_key_expired")
	advice(t, p, false, false)
	if p["order_id"] != decodeOrder(t, r).ID {
		t.Errorf("expired problem does not name the order: %s", late.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Errorf("%d charges", n)
	}
}

func TestKeyStatus(t *testing.T) {
	e := apptest.New(t)
	other, _ := e.NewClient(t, "other")
	o := decodeOrder(t, postOrder(t, e, e.Secret, "pos/7/sale-1", orderBody(9000, "tok_visa")))
	// A key with a slash travels percent-encoded in the path.
	r := e.Do(t, "GET", "/v1/idempotency-keys/pos%2F7%2Fsale-1", e.Secret, nil)
	var v struct {
		Key         string `json:"key"`
		State       string `json:"state"`
		OrderID     string `json:"order_id"`
		Fingerprint string `json:"fingerprint"`
		Expired     bool   `json:"expired"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil || r.Status != 200 || v.Key != "pos/7/sale-1" || v.State != "completed" ||
		v.OrderID != o.ID || len(v.Fingerprint) != 64 || v.Expired {
		t.Fatalf("key status %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", "/v1/idempotency-keys/pos%2F7%2Fsale-1", other, nil); r.Status != 404 {
		t.Fatalf("another client saw the key: %d", r.Status)
	}
	problemOf(t, e.Do(t, "GET", "/v1/idempotency-keys/nope", e.Secret, nil), 404, "idempotency_key_not_found")
}

// TestURLTextPostgresCannotStore: a path or query holding U+0000 or bytes that are not
// UTF-8 is refused before any handler, since Postgres would refuse it even as a search term.
func TestURLTextPostgresCannotStore(t *testing.T) {
	e := apptest.New(t)
	for _, path := range []string{
		"/v1/orders?customer_id=a%00b",
		"/v1/orders?customer_id=a%FFb",
		"/v1/orders?customer_id=cus_42&x%00=1",
		"/v1/idempotency-keys/a%00b",
		"/v1/idempotency-keys/a%C3b",
		"/v1/orders/1%00",
	} {
		problemOf(t, e.Do(t, "GET", path, e.Secret, nil), 400, "malformed_request")
	}
	// A keyed request is told it may fix the request and resend it with the same key.
	r := e.Do(t, "POST", "/v1/orders?ref=%00", e.Secret, orderBody(9000, "tok_visa"), "Idempotency-Key", "k-url")
	advice(t, problemOf(t, r, 400, "malformed_request"), false, true)
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("%d keys stored", n)
	}
}

func TestListOrdersByCustomer(t *testing.T) {
	e := apptest.New(t)
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, decodeOrder(t, postOrder(t, e, e.Secret, "k-list-"+itoa(int64(i)), orderBody(1000+int64(i), "tok_visa"))).ID)
	}
	var got []string
	after := ""
	for page := 0; page < 5; page++ {
		r := e.Do(t, "GET", "/v1/orders?customer_id=cus_42&limit=2"+after, e.Secret, nil)
		var p struct {
			Data      []orderJSON `json:"data"`
			HasMore   bool        `json:"has_more"`
			NextAfter string      `json:"next_after"`
		}
		if err := json.Unmarshal(r.Body, &p); err != nil || r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		for _, o := range p.Data {
			got = append(got, o.ID)
		}
		if !p.HasMore {
			break
		}
		after = "&after=" + p.NextAfter
	}
	if len(got) != 5 || got[0] != ids[4] || got[4] != ids[0] {
		t.Fatalf("pages gave %v, want %v newest first", got, ids)
	}
	problemOf(t, e.Do(t, "GET", "/v1/orders", e.Secret, nil), 422, "validation_failed")
	// A cursor is an order of the list, by its public id: not an integer, not an order of
	// another client or customer.
	other, _ := e.NewClient(t, "other")
	theirs := decodeOrder(t, postOrder(t, e, other, "k-theirs", orderBody(1000, "tok_visa"))).ID
	for _, after := range []string{"1", "99999", unknownOrder, theirs} {
		problemOf(t, e.Do(t, "GET", "/v1/orders?customer_id=cus_42&after="+after, e.Secret, nil), 422, "validation_failed")
	}
}
