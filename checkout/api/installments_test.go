package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
)

// An order in installments over HTTP: the 201 and GET show the plan, the first installment
// charged; the job charges the second when it is due; a refund beyond the first installment
// is refused, and an invalid plan is 422 naming the field, storing nothing.
func TestOrderInInstallments(t *testing.T) {
	e := apptest.New(t)
	ctx := context.Background()
	pm, err := psp.NewSandbox(e.DB, psp.SandboxOptions{}).SavePaymentMethod(ctx, e.ProviderCustomer(t, e.ClientID, "cus_8f2e"), psp.TokenVisa)
	if err != nil {
		t.Fatal(err)
	}
	body := func(count int) []byte {
		return []byte(fmt.Sprintf(`{"currency":"TRY","amount":1000,"installments":%d,
			"items":[{"sku":"SOFA","name":"Sofa","quantity":1,"unit_amount":1000}],
			"payment":{"customer":%q,"payment_method":%q}}`, count, "cus_8f2e", pm.ID))
	}
	type plan struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		Amount       int64  `json:"amount"`
		Installments []struct {
			N      int    `json:"n"`
			Amount int64  `json:"amount"`
			Status string `json:"status"`
		} `json:"installments"`
	}
	r := postOrder(t, e, e.Secret, "k-plan", body(3))
	var created plan
	if r.Status != 201 || json.Unmarshal(r.Body, &created) != nil {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	if got := fmt.Sprint(created.Installments); created.Status != "paid" || got != "[{1 334 paid} {2 333 scheduled} {3 333 scheduled}]" {
		t.Errorf("201: %s %s", created.Status, got)
	}
	if _, err := e.App.Installments.Run(ctx, e.Clock.Now().AddDate(0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	g := e.Do(t, "GET", "/v1/orders/"+created.ID, e.Secret, nil)
	var got plan
	if g.Status != 200 || json.Unmarshal(g.Body, &got) != nil {
		t.Fatalf("get: %d %s", g.Status, g.Body)
	}
	if s := fmt.Sprint(got.Installments); s != "[{1 334 paid} {2 333 paid} {3 333 scheduled}]" {
		t.Errorf("GET after the job: %s", s)
	}
	over, _ := refund(e, e.Secret, created.ID, "k-over", 335)
	advice(t, problemOf(t, over, 409, "refund_exceeds_first_installment"), false, true)

	before := count(t, e, `SELECT count(*) FROM orders`)
	bad := postOrder(t, e, e.Secret, "k-bad", body(13))
	problemOf(t, bad, 422, "validation_failed")
	if n := count(t, e, `SELECT count(*) FROM orders`); n != before {
		t.Errorf("an invalid plan stored an order")
	}
}
