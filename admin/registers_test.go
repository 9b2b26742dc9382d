package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// registerBatch is a batch of n cash sales of one BEANS each, keys key-0 … key-(n-1), from
// register R1 named name.
func registerBatch(batchKey, name string, from, to int) []byte {
	var sales []string
	for i := from; i < to; i++ {
		sales = append(sales, fmt.Sprintf(`{"idempotency_key":"key-%d","sold_at":"2026-05-01T09:30:00Z","order":
			{"currency":"TRY","items":[{"sku":"BEANS","name":"Beans","quantity":1,"unit_amount":1000,"from_stock":true}],
			 "amount":1000,"payment":{"method":"cash"}}}`, i))
	}
	return []byte(fmt.Sprintf(`{"batch_key":%q,"register":{"id":"R1","name":%q},"sales":[%s]}`, batchKey, name, strings.Join(sales, ",")))
}

// The registers page shows each register's resend statistics: batches, arrivals, sales
// created, duplicates absorbed and oversold sales. A register's name is text, never
// markup; the page needs a session; an order a register sold links to it.
func TestRegistersPage(t *testing.T) {
	e := apptest.New(t)
	if r := e.Do(t, "PUT", "/v1/products/BEANS", e.Secret, []byte(`{"name":"Beans","price":1000,"currency":"TRY","stock":4}`)); r.Status != 201 {
		t.Fatalf("put product: %d %s", r.Status, r.Body)
	}
	name := "<script>alert(1)</script>"
	for _, b := range [][]byte{
		registerBatch("q1", name, 0, 3), // 3 created
		registerBatch("q1", name, 0, 3), // resent: 3 duplicates
		registerBatch("q2", name, 2, 6), // 1 duplicate, 3 created, of which 1 oversold (4 in stock, 6 sold)
	} {
		if r := e.Do(t, "POST", "/v1/pos/sales", e.Secret, b); r.Status != 200 {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
	}
	anon := newBrowser(t, e)
	if p := anon.do("GET", "/admin/registers", nil); p.status == http.StatusOK {
		t.Fatal("the registers page answered without a session")
	}
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	list := b.do("GET", "/admin/registers", nil)
	if list.status != http.StatusOK {
		t.Fatalf("registers: %d %s", list.status, list.body)
	}
	if strings.Contains(list.body, name) {
		t.Fatal("a register's name was rendered as markup")
	}
	if list.doc.Find(`nav a[href="/admin/registers"]`).Length() != 1 {
		t.Fatal("the nav does not link the registers page")
	}
	row := list.doc.Find("table.registers tbody tr")
	if row.Length() != 1 {
		t.Fatalf("%d register rows, want 1", row.Length())
	}
	// Client, Register, Name, Batches, Arrivals, Created, Duplicates, Refused, Sales, Oversold.
	want := []string{"", "R1", name, "2", "3", "6", "4", "0", "6", "2"}
	for i, w := range want {
		if got := strings.TrimSpace(row.Find("td").Eq(i).Text()); w != "" && got != w {
			t.Fatalf("column %d: %q, want %q (row %q)", i, got, w, row.Text())
		}
	}
	var orderID string
	if err := e.DB.Get(&orderID, `SELECT o.public_id FROM orders o JOIN idempotency_keys k ON k.order_id = o.id WHERE k.key = 'key-5'`); err != nil {
		t.Fatal(err)
	}
	o := b.do("GET", "/admin/orders/"+orderID, nil)
	if o.status != http.StatusOK {
		t.Fatalf("order: %d", o.status)
	}
	link := o.doc.Find(`a[href^="/admin/registers?client="]`)
	if link.Length() != 1 || !strings.Contains(o.body, "units beyond the stock") {
		t.Fatalf("the order page of a register's sale does not link its register or say it oversold: %s", o.body)
	}
}
