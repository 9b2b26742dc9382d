package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestALostOrderIsChargedOnceOverTheAPI: the rows of a paid order and its key are lost
// while the provider keeps its charge; the client's retry with the same key and body is
// answered 201 with a new order that holds the first charge, and nothing is charged again.
func TestALostOrderIsChargedOnceOverTheAPI(t *testing.T) {
	e := apptest.New(t)
	body := orderBody(2500, "tok_visa")
	r := postOrder(t, e, e.Secret, "k-lost", body)
	if r.Status != 201 {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	var first, again struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Payment struct {
			ID string `json:"id"`
		} `json:"payment"`
	}
	if err := json.Unmarshal(r.Body, &first); err != nil {
		t.Fatal(err)
	}
	dbtest.LoseOrder(t, e.DB, first.ID)

	r = postOrder(t, e, e.Secret, "k-lost", body)
	if r.Status != 201 {
		t.Fatalf("the retry after the rows were lost: %d %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &again); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges`); n != 1 {
		t.Fatalf("%d charges at the provider, want the first one only", n)
	}
	if again.Status != "paid" || again.Payment.ID != first.Payment.ID {
		t.Errorf("the retry's order %s is %s with charge %s, want paid with the first charge %s",
			again.ID, again.Status, again.Payment.ID, first.Payment.ID)
	}
	if r := e.Do(t, "POST", "/v1/orders/"+again.ID+"/refunds", e.Secret, []byte(`{"amount":2500}`),
		"Idempotency-Key", "r-1"); r.Status != 201 {
		t.Fatalf("refund of the retry's order: %d %s", r.Status, r.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, first.Payment.ID); n != 1 {
		t.Errorf("%d refunds of the charge, want 1", n)
	}
}

// TestALostSaleIsChargedOnce: the same for a register's card_token sale, claimed by a batch.
func TestALostSaleIsChargedOnce(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 10)
	batch := batchBody("b-1", []sale{{key: "s-card", order: string(stockOrderBody("BEANS", 1, 1000))}})
	out := sendBatch(t, e, batch)
	wantOutcomes(t, out, 1, "created", nil)
	dbtest.LoseOrder(t, e.DB, out[0].orderID(t))

	again := sendBatch(t, e, batch)
	wantOutcomes(t, again, 1, "created", nil)
	if n := count(t, e, `SELECT count(*) FROM psp_charges`); n != 1 {
		t.Fatalf("%d charges at the provider, want the first one only", n)
	}
	if n := count(t, e, `SELECT count(*) FROM orders o JOIN payments p ON p.order_id = o.id
		WHERE o.public_id = $1 AND o.status = 'paid'`, again[0].orderID(t)); n != 1 {
		t.Errorf("the retry's sale is not paid with a payment")
	}
}

// TestProviderEventsFindTheOrderThatAdoptedALostCharge: the charge adopted by a lost
// order's retry still names the lost order in its description; a refund made at the
// provider's dashboard is recorded on the order that holds the charge, found by its payment.
func TestProviderEventsFindTheOrderThatAdoptedALostCharge(t *testing.T) {
	e, k := inboxEnv(t)
	body := orderBody(9000, "tok_visa")
	first := decodeOrder(t, postOrder(t, e, e.Secret, "k-lost", body))
	dbtest.LoseOrder(t, e.DB, first.ID)
	again := decodeOrder(t, postOrder(t, e, e.Secret, "k-lost", body))

	var c struct {
		ID          string `db:"id"`
		Key         string `db:"key"`
		Description string `db:"description"`
	}
	if err := e.DB.Get(&c, `SELECT id, key, description FROM psp_charges`); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(psp.Event{ID: "evt_dash", Type: psp.EventRefundSucceeded, Created: time.Now().UTC(),
		Data: psp.EventData{ChargeID: c.ID, ChargeKey: c.Key, Description: c.Description, Sequence: 2,
			Amount: 9000, Currency: "TRY", Status: psp.StatusSucceeded, RefundedAmount: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, err := deliver(e, k, "evt_dash", b, nil); err != nil || status != 200 {
		t.Fatalf("the dashboard refund's event: %d %v", status, err)
	}
	if got := count(t, e, `SELECT refunded_amount FROM orders WHERE public_id = $1`, again.ID); got != 2000 {
		t.Errorf("the retry's order refunded %d, want the dashboard's 2000 (charge described %q)", got, c.Description)
	}
}
