package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The products page lists each product's level; a product's page lists its movements,
// each sale linked to the order that caused it. A sku is text, never markup. Both need a
// session.
func TestProductsPage(t *testing.T) {
	e := apptest.New(t)
	sku := "<b>BEANS</b>"
	r := e.Do(t, "PUT", "/v1/products/%3Cb%3EBEANS%3C%2Fb%3E", e.Secret, []byte(`{"name":"Beans","price":1000,"currency":"TRY","stock":3}`))
	if r.Status != 201 {
		t.Fatalf("put product: %d %s", r.Status, r.Body)
	}
	o := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":%q,"name":"Beans","quantity":2,"unit_amount":1000,"from_stock":true}],
		"amount":2000,"payment":{"card_token":"tok_visa"}}`, sku)), "Idempotency-Key", "k1")
	if o.Status != 201 {
		t.Fatalf("order: %d %s", o.Status, o.Body)
	}
	var orderID string
	if err := e.DB.Get(&orderID, `SELECT public_id FROM orders`); err != nil {
		t.Fatal(err)
	}
	anon := newBrowser(t, e)
	if p := anon.do("GET", "/admin/products", nil); p.status == http.StatusOK {
		t.Fatal("the products page answered without a session")
	}
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	list := b.do("GET", "/admin/products", nil)
	if list.status != http.StatusOK {
		t.Fatalf("products: %d %s", list.status, list.body)
	}
	if strings.Contains(list.body, sku) {
		t.Fatal("a sku was rendered as markup")
	}
	row := list.doc.Find("table.products tbody tr")
	if row.Length() != 1 || !strings.Contains(row.Text(), sku) || row.Find("td").Eq(4).Text() != "1" {
		t.Fatalf("products rows: %q", row.Text())
	}
	href, _ := row.Find("a").Attr("href")
	one := b.do("GET", href, nil)
	if one.status != http.StatusOK {
		t.Fatalf("product %s: %d %s", href, one.status, one.body)
	}
	ms := one.doc.Find("table.movements tbody tr")
	if ms.Length() != 2 {
		t.Fatalf("%d movements, want 2 (put, sale)", ms.Length())
	}
	sale := ms.Eq(0)
	if link, _ := sale.Find("a").Attr("href"); link != "/admin/orders/"+orderID || !strings.Contains(sale.Text(), "-2") {
		t.Fatalf("sale movement %q links %q", sale.Text(), link)
	}
	if !strings.Contains(ms.Eq(1).Text(), "+3") {
		t.Fatalf("put movement %q", ms.Eq(1).Text())
	}
	if p := b.do("GET", "/admin/products/1/NOPE", nil); p.status != http.StatusNotFound {
		t.Fatalf("unknown product: %d", p.status)
	}
}
