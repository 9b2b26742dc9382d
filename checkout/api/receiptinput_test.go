package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// fieldsOf lists the fields a validation_failed problem names.
func fieldsOf(t testing.TB, problem []byte) []string {
	t.Helper()
	var p struct {
		Errors []struct{ Field string } `json:"errors"`
	}
	if err := json.Unmarshal(problem, &p); err != nil {
		t.Fatalf("problem %s: %v", problem, err)
	}
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	return out
}

// refusedAtBothDoors sends order (an order's JSON, paid by card for POST /v1/orders and in
// cash for a register's batch) to both doors that take a receipt's address and text, and
// checks that each refuses it with 422 validation_failed naming field (under order. in a
// batch, as a sale's fields are), and writes nothing.
func refusedAtBothDoors(t *testing.T, e *apptest.Env, key, order, field string) {
	t.Helper()
	card := strings.Replace(order, `"payment":{"method":"cash"}`, `"payment":{"card_token":"tok_visa"}`, 1)
	p := problemOf(t, postOrder(t, e, e.Secret, key, []byte(card)), 422, "validation_failed")
	b, _ := json.Marshal(p)
	if got := fieldsOf(t, b); len(got) != 1 || got[0] != field {
		t.Errorf("POST /v1/orders: fields %v, want [%s]", got, field)
	}
	out := sendBatch(t, e, batchBody("b-"+key, []sale{{key: key, order: order}}))
	wantOutcomes(t, out, 1, "invalid", nil)
	if out[0].Status != 422 || out[0].code(t) != "validation_failed" {
		t.Errorf("batch: %d %s", out[0].Status, out[0].Problem)
	} else if got := fieldsOf(t, out[0].Problem); len(got) != 1 || got[0] != "order."+field {
		t.Errorf("batch: fields %v, want [order.%s]", got, field)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = $1`, key); n != 0 {
		t.Errorf("the refused order stored its key")
	}
}

// cashOrder is a cash sale of one Latte at 0.01 named name, for email.
func cashOrder(name, email string) string {
	return fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"LATTE","name":%s,"quantity":1,"unit_amount":1}],
		"amount":1,"payment":{"method":"cash"},"customer":{"email":%s}}`, jsonString(name), jsonString(email))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestReceiptAddressIsAMailbox: a customer e-mail that is not an ordinary mailbox (the
// address literals, localhost and % routing issue 30 found handed to the mail server, and
// their kin) is refused by POST /v1/orders and by a register's batch alike, before any key
// or order is written; ordinary addresses are taken by both.
func TestReceiptAddressIsAMailbox(t *testing.T) {
	e := apptest.New(t)
	for i, addr := range []string{
		"a@[10.0.0.1]", "a@[127.0.0.1]", "a@[IPv6:::1]", "a@localhost", "a@LocalHost", "a@mail.localhost",
		"a%b@x", "a%b@example.com", "a!b@example.com", `"a b"@example.com`, "a@10.0.0.1", "a@intranet",
		"a@exa_mple.com", "Ayse <a@example.com>", "a@example.com (Ayse)", strings.Repeat("a", 65) + "@example.com",
	} {
		t.Run(addr, func(t *testing.T) {
			refusedAtBothDoors(t, e, fmt.Sprintf("bad-email-%d", i), cashOrder("Latte", addr), "customer.email")
		})
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders from refused requests", n)
	}
	for i, addr := range []string{"ayse@example.com", "Ayse.Yilmaz+till@Mail.Example.COM.TR"} {
		order := cashOrder("Latte", addr)
		card := strings.Replace(order, `"payment":{"method":"cash"}`, `"payment":{"card_token":"tok_visa"}`, 1)
		if r := postOrder(t, e, e.Secret, fmt.Sprintf("good-email-%d", i), []byte(card)); r.Status != 201 {
			t.Fatalf("%s: %d %s", addr, r.Status, r.Body)
		}
		out := sendBatch(t, e, batchBody(fmt.Sprintf("good-%d", i), []sale{{key: fmt.Sprintf("good-sale-%d", i), order: order}}))
		wantOutcomes(t, out, 1, "created", nil)
	}
}

// TestReceiptTextIsBounded: the text a client writes that a receipt prints (an item's name,
// a refund's reason) is one line of printable text of bounded length: a line break (a
// header of its own, were it ever put in one), another control character or a
// bidirectional control is refused with 422 naming the field, at both order doors and at
// the refund's, before anything is written.
func TestReceiptTextIsBounded(t *testing.T) {
	e := apptest.New(t)
	for i, name := range []string{
		"Latte\r\nBcc: evil@attacker.example", "Latte\n", "Lat\tte", "Lat\x1bte", "Lat\u2028te",
		"Latte \u202egnp.exe", strings.Repeat("L", 201),
	} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			refusedAtBothDoors(t, e, fmt.Sprintf("bad-name-%d", i), cashOrder(name, "ayse@example.com"), "items[0].name")
		})
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders from refused requests", n)
	}

	card := strings.Replace(cashOrder("Türk kahvesi ☕", "ayse@example.com"), `"payment":{"method":"cash"}`, `"payment":{"card_token":"tok_visa"}`, 1)
	r := postOrder(t, e, e.Secret, "good-name", []byte(card))
	if r.Status != 201 {
		t.Fatalf("an ordinary name: %d %s", r.Status, r.Body)
	}
	var o orderJSON
	if err := json.Unmarshal(r.Body, &o); err != nil {
		t.Fatal(err)
	}
	for i, reason := range []string{"customer asked\r\nBcc: evil@attacker.example", "x\u202e", strings.Repeat("r", 501)} {
		key := fmt.Sprintf("bad-reason-%d", i)
		r := e.Do(t, "POST", "/v1/orders/"+o.ID+"/refunds", e.Secret, []byte(fmt.Sprintf(`{"amount":1,"reason":%s}`, jsonString(reason))), "Idempotency-Key", key)
		p := problemOf(t, r, 422, "validation_failed")
		b, _ := json.Marshal(p)
		if got := fieldsOf(t, b); len(got) != 1 || got[0] != "reason" {
			t.Errorf("reason %q: fields %v", reason, got)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds from refused requests", n)
	}
}
