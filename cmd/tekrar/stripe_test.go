package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp/stripe/stripetest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestServeWithStripeAnswersAPaidOrder runs `tekrar serve --provider stripe` against a
// stripe-mock started for the test, behind the fault layer answering as Stripe's test cards
// (the bare mock's PaymentIntent has no outcome): POST /v1/orders is a paid order charged
// by one PaymentIntent, its retry replays it, and a declined test card is 402.
func TestServeWithStripeAnswersAPaidOrder(t *testing.T) {
	t.Parallel()
	mock := stripetest.Start(t)
	layer := &stripetest.Layer{TestCards: true}
	front := httptest.NewServer(layer.Handler(mock))
	t.Cleanup(front.Close)
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	port := freePorts(t, 1)[0]
	env := childEnv("DATABASE_URL="+dbURL, "TEKRAR_ADDR="+addrOf(port),
		"TEKRAR_STRIPE_API_BASE="+front.URL, "TEKRAR_STRIPE_SECRET_KEY="+stripetest.SecretKey)
	p := startTekrar(t, env, nil, "serve", "--provider", "stripe")
	base := "http://" + addrOf(port)
	waitReady(t, p, base, 30*time.Second)
	secret := newClientSecret(t, dbURL, "stripe app")
	c := newHTTPClient()

	r := mustSend(t, c, "POST", base+"/v1/orders", secret, orderJSONBody(1234, "pm_card_visa"), "Idempotency-Key", "stripe-1")
	var order struct{ Status string }
	if err := json.Unmarshal(r.Body, &order); err != nil || r.Status != http.StatusCreated || order.Status != "paid" {
		t.Fatalf("POST /v1/orders with Stripe: %d %s", r.Status, r.Body)
	}
	again := mustSend(t, c, "POST", base+"/v1/orders", secret, orderJSONBody(1234, "pm_card_visa"), "Idempotency-Key", "stripe-1")
	if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry: %d replayed=%q", again.Status, again.Header.Get("Idempotent-Replayed"))
	}
	if n := layer.Served(http.MethodPost, "/v1/payment_intents"); n != 1 {
		t.Errorf("Stripe saw %d PaymentIntents created, want 1", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM payments WHERE provider_charge_id LIKE 'pi\_%'`); n != 1 {
		t.Errorf("%d payments of a PaymentIntent, want 1", n)
	}
	problemOf(t, mustSend(t, c, "POST", base+"/v1/orders", secret, orderJSONBody(1234, "pm_card_chargeDeclined"),
		"Idempotency-Key", "stripe-2"), http.StatusPaymentRequired, "payment_declined")
}
