package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
)

// tenantEnv is two clients of one tekrar: A (the env's own client) and B, each with a
// customer "cus_1" who saved a card at the provider, and a paid order of B's with a refund.
type tenantEnv struct {
	*apptest.Env
	b           string // B's secret
	bID         int64
	cardA       psp.PaymentMethod
	cardB       psp.PaymentMethod
	orderB      string // B's paid order, on B's card
	refundB     string // a refund of it
	keyB        string // the Idempotency-Key of B's order
	orderBInner int64
}

func newTenantEnv(t *testing.T) *tenantEnv {
	t.Helper()
	e := &tenantEnv{Env: apptest.New(t)}
	e.b, e.bID = e.NewClient(t, "b")
	e.cardA = saveCard(t, e.Env, e.ClientID, "cus_1", psp.TokenVisa)
	e.cardB = saveCard(t, e.Env, e.bID, "cus_1", psp.TokenMastercard)
	e.keyB = "k-b-plan"
	r := postOrder(t, e.Env, e.b, e.keyB, savedCardOrder("cus_1", e.cardB.ID, 900, 0))
	if r.Status != 201 {
		t.Fatalf("B's order on B's card: %d %s", r.Status, r.Body)
	}
	e.orderB = decodeOrder(t, r).ID
	rf, err := refund(e.Env, e.b, e.orderB, "k-b-refund", 100)
	if err != nil || rf.Status != 201 {
		t.Fatalf("B's refund: %d %s %v", rf.Status, rf.Body, err)
	}
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(rf.Body, &v); err != nil {
		t.Fatal(err)
	}
	e.refundB = v.ID
	if err := e.DB.Get(&e.orderBInner, `SELECT id FROM orders WHERE public_id = $1`, e.orderB); err != nil {
		t.Fatal(err)
	}
	return e
}

// saveCard saves token's card at the sandbox provider for the customer of client clientID,
// as a client's backend does: under the provider customer id of that client's customer.
func saveCard(t *testing.T, e *apptest.Env, clientID int64, customer, token string) psp.PaymentMethod {
	t.Helper()
	pm, err := psp.NewSandbox(e.DB, psp.SandboxOptions{}).SavePaymentMethod(context.Background(), e.ProviderCustomer(t, clientID, customer), token)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

func savedCardOrder(customer, method string, amount int64, installments int) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","amount":%d,"installments":%d,
		"items":[{"sku":"SOFA","name":"Sofa","quantity":1,"unit_amount":%d}],
		"payment":{"customer":%q,"payment_method":%q}}`, amount, installments, amount, customer, method))
}

// snapshot is everything B has in Postgres and everything the provider's ledger holds on
// B's card and charges: a refused request of A's must leave it as it was.
func (e *tenantEnv) snapshot(t *testing.T) string {
	t.Helper()
	var s []string
	for _, q := range []string{
		`SELECT coalesce(string_agg(concat_ws(' ', public_id, status, captured_amount, refunded_amount, updated_at), ', ' ORDER BY id), '') FROM orders WHERE client_id = $1`,
		`SELECT coalesce(string_agg(concat_ws(' ', public_id, status, amount), ', ' ORDER BY id), '') FROM refunds WHERE client_id = $1`,
		`SELECT coalesce(string_agg(concat_ws(' ', i.n, i.status, i.attempts, i.updated_at), ', ' ORDER BY i.order_id, i.n), '') FROM installments i JOIN orders o ON o.id = i.order_id WHERE o.client_id = $1`,
		`SELECT coalesce(string_agg(concat_ws(' ', d.dispute_id, d.status), ', ' ORDER BY d.dispute_id), '') FROM order_disputes d JOIN orders o ON o.id = d.order_id WHERE o.client_id = $1`,
		`SELECT count(*)::text FROM outbox_events WHERE client_id = $1`,
		`SELECT count(*)::text FROM idempotency_keys WHERE client_id = $1`,
	} {
		var v string
		if err := e.DB.Get(&v, q, e.bID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		s = append(s, v)
	}
	for _, q := range []string{
		`SELECT coalesce(string_agg(concat_ws(' ', id, status, amount), ', ' ORDER BY id), '') FROM psp_charges WHERE status = 'succeeded'`,
		`SELECT count(*)::text FROM psp_refunds`,
		`SELECT count(*)::text FROM psp_disputes`,
	} {
		var v string
		if err := e.DB.Get(&v, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		s = append(s, v)
	}
	return strings.Join(s, "\n")
}

// sameProblem checks that two problems say the same, but for the order each names.
func sameProblem(t *testing.T, got, want map[string]any) {
	t.Helper()
	for _, p := range []map[string]any{got, want} {
		delete(p, "order_id")
		delete(p, "instance")
		delete(p, "request_id")
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("problem %s\n   want %s (as for a card that does not exist)", g, w)
	}
}

// TestSavedCardsAreTheirClients: a saved card is named by its customer id, which the
// merchant chooses (and "cus_1" is everybody's first), and its method id. A client that
// names another client's customer and card is answered as for a card that does not exist,
// with or without installments, and nothing of the other client's changes: no charge on
// its card, now or when the plan's job runs, no row of its own.
func TestSavedCardsAreTheirClients(t *testing.T) {
	e := newTenantEnv(t)
	before := e.snapshot(t)
	unknown := problemOf(t, postOrder(t, e.Env, e.Secret, "k-unknown", savedCardOrder("cus_1", "pm_doesnotexist", 900, 0)), 402, "payment_declined")
	if unknown["decline_code"] != psp.DeclineInvalidCard {
		t.Fatalf("a card that does not exist: %v", unknown)
	}
	for _, tc := range []struct {
		name         string
		installments int
	}{{"one-charge", 0}, {"installments", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			r := postOrder(t, e.Env, e.Secret, "k-a-"+tc.name, savedCardOrder("cus_1", e.cardB.ID, 900, tc.installments))
			sameProblem(t, problemOf(t, r, 402, "payment_declined"), copyOf(unknown))
			if _, err := e.App.Installments.Run(context.Background(), e.Clock.Now().AddDate(0, 3, 1)); err != nil {
				t.Fatal(err)
			}
			if after := e.snapshot(t); after != before {
				t.Errorf("B's data or B's card at the provider changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
	// At the provider, A's attempts are what a card that does not exist makes: declined, on
	// no card. B's card was charged once, for B's own order.
	if got := count(t, e.Env, `SELECT count(*) FROM psp_charges WHERE decline_code = 'invalid_card' AND card_last4 = ''`); got != 3 {
		t.Errorf("%d charges declined as invalid cards, want 3 (the unknown card and A's two attempts)", got)
	}
	if got := count(t, e.Env, `SELECT count(*) FROM psp_charges WHERE card_last4 = $1`, e.cardB.CardLast4); got != 1 {
		t.Errorf("B's card was charged %d times, want once (B's order)", got)
	}
	// A's own card, by the same customer id, is A's to charge.
	if r := postOrder(t, e.Env, e.Secret, "k-a-own", savedCardOrder("cus_1", e.cardA.ID, 900, 0)); r.Status != 201 {
		t.Fatalf("A's order on A's card: %d %s", r.Status, r.Body)
	}
}

func copyOf(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestOtherClientsObjectsAreNotFound: everything a client names by id (an order, its
// refunds, an idempotency key, a cart, a product, a webhook endpoint) is looked up within
// the client: another client's is answered as one that does not exist, and a refund of
// another client's order reaches neither the provider nor Postgres.
func TestOtherClientsObjectsAreNotFound(t *testing.T) {
	e := newTenantEnv(t)
	if r := e.Do(t, "PUT", "/v1/carts/cart-b", e.b, []byte(`{"items":[{"sku":"SOFA","name":"Sofa","quantity":1,"unit_amount":900}]}`)); r.Status != 200 && r.Status != 201 {
		t.Fatalf("B's cart: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "PUT", "/v1/products/SOFA-B", e.b, []byte(`{"name":"Sofa","price":900,"currency":"TRY","stock":3}`)); r.Status != 200 && r.Status != 201 {
		t.Fatalf("B's product: %d %s", r.Status, r.Body)
	}
	own := decodeOrder(t, postOrder(t, e.Env, e.Secret, "k-a-own", orderBody(500, psp.TokenVisa))).ID
	before := e.snapshot(t)
	for _, tc := range []struct {
		name, method, path, body, code string
	}{
		{"order", "GET", "/v1/orders/" + e.orderB, "", "order_not_found"},
		{"refunds of the order", "GET", "/v1/orders/" + e.orderB + "/refunds", "", "order_not_found"},
		{"refund", "GET", "/v1/orders/" + e.orderB + "/refunds/" + e.refundB, "", "order_not_found"},
		{"refund under A's order", "GET", "/v1/orders/" + own + "/refunds/" + e.refundB, "", "refund_not_found"},
		{"refund of the order", "POST", "/v1/orders/" + e.orderB + "/refunds", `{"amount":100}`, "order_not_found"},
		{"idempotency key", "GET", "/v1/idempotency-keys/" + e.keyB, "", "idempotency_key_not_found"},
		{"cart", "GET", "/v1/carts/cart-b", "", "cart_not_found"},
		{"order of the cart", "POST", "/v1/orders", `{"currency":"TRY","amount":900,"cart_id":"cart-b","payment":{"card_token":"tok_visa"}}`, "cart_not_found"},
		{"product", "GET", "/v1/products/SOFA-B", "", "product_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			var headers []string
			if tc.body != "" {
				body, headers = []byte(tc.body), []string{"Idempotency-Key", "k-" + strings.ReplaceAll(tc.name, " ", "-")}
			}
			problemOf(t, e.Do(t, tc.method, tc.path, e.Secret, body, headers...), 404, tc.code)
		})
	}
	if after := e.snapshot(t); after != before {
		t.Errorf("B's data or the provider's ledger changed:\n%s\nwas\n%s", after, before)
	}
	// The list of A's orders by B's customer id lists none of B's.
	if r := e.Do(t, "GET", "/v1/orders?customer_id=cus_1", e.Secret, nil); r.Status != 200 || strings.Contains(string(r.Body), e.orderB) {
		t.Errorf("A's list by customer: %d %s", r.Status, r.Body)
	}
}

// TestProviderEventsTouchOnlyTheirOrder: the provider's event of A's charge (a refund at
// its dashboard, a dispute) changes A's order, even when its description names B's order, as
// a charge made by anyone under any description can; it changes nothing of B's: an order
// follows only the charge made under its own provider key.
func TestProviderEventsTouchOnlyTheirOrder(t *testing.T) {
	e := newTenantEnv(t)
	own := decodeOrder(t, postOrder(t, e.Env, e.Secret, "k-a-own", savedCardOrder("cus_1", e.cardA.ID, 900, 0))).ID
	var ch struct {
		ID    string `db:"provider_charge_id"`
		Key   string `db:"provider_key"`
		Order int64  `db:"order_id"`
	}
	if err := e.DB.Get(&ch, `SELECT p.provider_charge_id, p.provider_key, p.order_id FROM payments p
		JOIN orders o ON o.id = p.order_id WHERE o.public_id = $1`, own); err != nil {
		t.Fatal(err)
	}
	event := func(id, typ, description string, seq int, d func(*psp.EventData)) string {
		t.Helper()
		pe := psp.Event{ID: id, Type: typ, Created: e.Clock.Now(), Data: psp.EventData{ChargeID: ch.ID, ChargeKey: ch.Key,
			Sequence: seq, Amount: 900, Currency: "TRY", Description: description, Status: psp.StatusSucceeded}}
		d(&pe.Data)
		body, _ := json.Marshal(pe)
		out, err := e.App.Inbox.Receive(context.Background(), "psp", body, pe)
		if err != nil {
			t.Fatalf("event %s: %v", id, err)
		}
		return out
	}
	refunded := func(d *psp.EventData) { d.RefundedAmount = 300 }
	disputed := func(d *psp.EventData) {
		d.RefundedAmount = 300
		d.Dispute = &psp.Dispute{ID: "dp_forged", ChargeID: ch.ID, Amount: 900, Reason: "fraudulent", Status: psp.DisputeOpen, Created: e.Clock.Now()}
	}
	before := e.snapshot(t)
	bOrder := fmt.Sprintf("order %d", e.orderBInner)
	for i, out := range []string{
		event("evt_refund_b", psp.EventRefundSucceeded, bOrder, 2, refunded),
		event("evt_dispute_b", psp.EventDisputeCreated, bOrder, 3, disputed),
	} {
		if out != "applied" {
			t.Errorf("forged event %d: %s", i, out)
		}
	}
	if after := e.snapshot(t); after != before {
		t.Errorf("an event of A's charge changed B's order:\n%s\nwas\n%s", after, before)
	}
	// They are events of A's charge, under the provider key A's order made it with: the inbox
	// finds the order by that key (a description is the provider's free text), so they are A's.
	if n := count(t, e.Env, `SELECT count(*) FROM refunds WHERE order_id = $1`, ch.Order); n != 1 {
		t.Fatalf("the events of A's charge naming B's order: %d refunds on A's order, want 1", n)
	}
	// The same events naming A's order are A's.
	event("evt_refund_a", psp.EventRefundSucceeded, fmt.Sprintf("order %d", ch.Order), 4, refunded)
	event("evt_dispute_a", psp.EventDisputeCreated, fmt.Sprintf("order %d", ch.Order), 5, disputed)
	var status string
	if err := e.DB.Get(&status, `SELECT status || ' ' || refunded_amount FROM orders WHERE id = $1`, ch.Order); err != nil || status != "disputed 300" {
		t.Errorf("A's order after its charge's events: %q %v", status, err)
	}
	if after := e.snapshot(t); after != before {
		t.Errorf("A's events changed B's order:\n%s\nwas\n%s", after, before)
	}
}

// TestRegisterSalesOnSavedCards: a register's card sale may name a saved card, and is
// charged as an order is: on another client's card it is declined as a card that does not
// exist, and nothing of the other client's changes. A sale is paid at once: installments
// are refused (the register's claim keeps no plan), before anything is charged.
func TestRegisterSalesOnSavedCards(t *testing.T) {
	e := newTenantEnv(t)
	before := e.snapshot(t)
	sales := func(key string, card psp.PaymentMethod, installments int) []byte {
		return batchBody(key, []sale{{key: key, order: string(savedCardOrder("cus_1", card.ID, 900, installments))}})
	}
	out := sendBatch(t, e.Env, sales("k-sale-b", e.cardB, 0))
	wantOutcomes(t, out, 1, "declined", nil)
	if c := out[0].code(t); c != "payment_declined" {
		t.Fatalf("a sale on B's card: %s", c)
	}
	if after := e.snapshot(t); after != before {
		t.Errorf("A's sale changed B's data or charged B's card:\n%s\nwas\n%s", after, before)
	}
	charges := count(t, e.Env, `SELECT count(*) FROM psp_charges`)
	out = sendBatch(t, e.Env, sales("k-sale-plan", e.cardA, 3))
	wantOutcomes(t, out, 1, "invalid", nil)
	if n := count(t, e.Env, `SELECT count(*) FROM psp_charges`); n != charges {
		t.Errorf("a sale in installments was charged: %d charges, was %d", n, charges)
	}
	wantOutcomes(t, sendBatch(t, e.Env, sales("k-sale-a", e.cardA, 0)), 1, "created", nil)
}
