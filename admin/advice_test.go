package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
)

// A 20.00 double tap, 10.00 refunded on the first order: the second order's refund form
// prefills the 10.00 left, says the first is refunded in part, and sending it as it is
// leaves the customer paying 20.00 once. Before, it prefilled 20.00 and said the first was
// "refunded already": sent as asked, the customer paid 10.00 for a 20.00 purchase.
func TestRefundFormAfterAPartialRefund(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	first := actOrder(t, e, "part-one", 2000)
	second := actOrder(t, e, "part-two", 2000)
	firstRefund, secondRefund := "/admin/orders/"+first+"/refund", "/admin/orders/"+second+"/refund"
	confirm := b.do("GET", firstRefund, nil)
	if p := b.do("POST", firstRefund, actForm(t, confirm, firstRefund, "amount", "10.00")); p.status != http.StatusSeeOther {
		t.Fatalf("refund 10.00 of the first: %d %s", p.status, p.body)
	}

	form := b.do("GET", secondRefund, nil)
	if got, _ := form.doc.Find(`input[name=amount]`).Attr("value"); got != "10.00" {
		t.Errorf("the second order's refund form prefills %q, want 10.00", got)
	}
	w := form.doc.Find(".confirm .warning").Text()
	for _, want := range []string{"Refunded already: order " + first + ", in part (10.00 TRY of the 20.00 TRY charged)", "10.00 TRY is left to refund"} {
		if !strings.Contains(w, want) {
			t.Errorf("the warning lacks %q: %s", want, w)
		}
	}
	// The operator does as asked: sends the form as prefilled, with the id typed if asked.
	f := actForm(t, form, secondRefund)
	if f.Has("confirm") {
		f.Set("confirm", second)
	}
	if p := b.do("POST", secondRefund, f); p.status != http.StatusSeeOther {
		t.Fatalf("refund the second as prefilled: %d %s", p.status, p.body)
	}
	paid := actInt(t, e, `SELECT sum(captured_amount - refunded_amount) FROM orders WHERE public_id::text = ANY(ARRAY[$1, $2]::text[])`, first, second)
	if paid != 2000 {
		t.Errorf("the customer has paid %d for a 2000 purchase", paid)
	}
	// Nothing is left: the pair page says so, and the form of either order prefills nothing.
	pair := b.do("GET", "/admin/orders/pair?first="+first+"&second="+second, nil).doc.Find(".verdict .advice").Text()
	if !strings.Contains(pair, "Nothing more to refund") {
		t.Errorf("pair advice once paid once: %s", pair)
	}
	form = b.do("GET", firstRefund, nil)
	if got, _ := form.doc.Find(`input[name=amount]`).Attr("value"); got != "0.00" && got != "" {
		t.Errorf("the first order's refund form prefills %q once the customer paid once", got)
	}
}

// planOrder orders amount in count installments on a saved card under key, and returns the
// order's public id. The card is saved under the provider customer that names the client, as
// a merchant saves it (clients.Client.ProviderCustomer).
func planOrder(t *testing.T, e *apptest.Env, key, customer string, amount int64, count int) string {
	t.Helper()
	pm, err := psp.NewSandbox(e.DB, psp.SandboxOptions{}).SavePaymentMethod(context.Background(),
		e.ProviderCustomer(t, e.ClientID, customer), psp.TokenVisa)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"currency":"TRY","amount":%d,"installments":%d,
		"items":[{"sku":"SOFA","name":"Sofa","quantity":1,"unit_amount":%d}],
		"payment":{"customer":%q,"payment_method":%q},"customer":{"id":%q}}`, amount, count, amount, customer, pm.ID, customer)
	if r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(body), "Idempotency-Key", key); r.Status != 201 {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	var id string
	if err := e.DB.Get(&id, `SELECT o.public_id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id
		 WHERE k.client_id = $1 AND k.key = $2`, e.ClientID, key); err != nil {
		t.Fatal(err)
	}
	return id
}

// A 4500.00 order in three installments, two paid: the verdict counts two charges of
// 1500.00 each, and the refund form offers the first installment's charge. Before, the
// verdict said "charge ... of 4500.00", the order's total.
func TestInstallmentOrderVerdict(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	id := planOrder(t, e, "k-sofa", "cus_sofa", 450000, 3)
	if _, err := e.App.Installments.Run(context.Background(), e.Clock.Now().AddDate(0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	var charges []string
	if err := e.DB.Select(&charges, `SELECT i.provider_charge_id FROM installments i JOIN orders o ON o.id = i.order_id
		 WHERE o.public_id = $1 AND i.status = 'paid' ORDER BY i.n`, id); err != nil || len(charges) != 2 {
		t.Fatalf("paid installments %v: %v", charges, err)
	}
	v := b.do("GET", "/admin/orders/"+id, nil).doc.Find(".verdict")
	text := v.Text()
	for _, want := range []string{
		"2 of its 3 installments charged",
		"one charge per paid installment (2 so far",
		"charge " + charges[0] + " of 1500.00 TRY and charge " + charges[1] + " of 1500.00 TRY",
		"3000.00 TRY of 4500.00 TRY so far",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the verdict lacks %q: %s", want, text)
		}
	}
	if strings.Contains(text, "of 4500.00 TRY.") || strings.Contains(v.Find(".headline").Text(), "charged once") {
		t.Errorf("the verdict takes the total for one charge: %s", text)
	}
	// Its refund form offers what may be refunded: the first installment's charge, not the
	// 3000.00 charged (a refund of more is refused, refund_exceeds_first_installment).
	form := b.do("GET", "/admin/orders/"+id+"/refund", nil)
	if got, _ := form.doc.Find(`input[name=amount]`).Attr("value"); got != "1500.00" {
		t.Errorf("the refund form of an order in installments offers %q, want 1500.00", got)
	}
}

// Three taps, three keys, three charges: the order page names the orders to refund by
// their public ids, with links to them, and the pair page of the first two says "3 times"
// and names the third. Before, the order page advised refunding "(139, 140)", internal ids,
// and the pair page said "charged twice".
func TestTripleTapAdvice(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	ids := []string{actOrder(t, e, "tri-1", 4500), actOrder(t, e, "tri-2", 4500), actOrder(t, e, "tri-3", 4500)}
	e.App.Service.FlushHistory()

	p := b.do("GET", "/admin/orders/"+ids[0], nil)
	advice := p.doc.Find(".verdict .advice").Text()
	if !strings.Contains(advice, "refund every order but the first in full ("+ids[1]+", "+ids[2]+")") {
		t.Errorf("order page advice: %s", advice)
	}
	for _, id := range ids[1:] {
		if p.doc.Find(`.verdict .advice a[href="/admin/orders/`+id+`"]`).Length() != 1 {
			t.Errorf("the advice does not link order %s: %s", id, p.body)
		}
	}

	pair := b.do("GET", "/admin/orders/pair?first="+ids[0]+"&second="+ids[1], nil)
	v := pair.doc.Find(".verdict")
	if h := v.Find(".headline").Text(); !strings.Contains(h, "charged 3 times") || strings.Contains(h, "twice") {
		t.Errorf("pair headline: %s", h)
	}
	if !strings.Contains(v.Text(), ids[2]) || v.Find(`a[href="/admin/orders/`+ids[2]+`"]`).Length() == 0 {
		t.Errorf("the pair page does not name the third order %s: %s", ids[2], v.Text())
	}
	if a := v.Find(".advice").Text(); !strings.Contains(a, ids[1]+", "+ids[2]) {
		t.Errorf("pair advice: %s", a)
	}
}
