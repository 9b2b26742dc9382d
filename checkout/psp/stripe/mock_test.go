package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/stripe"
	"github.com/tekrar/tekrar/checkout/psp/stripe/stripetest"
)

// mockFixtureCreated is the created time of every object stripe-mock answers.
var mockFixtureCreated = time.Unix(1234567890, 0)

// mockFingerprint is the card fingerprint of stripe-mock's card fixtures.
const mockFingerprint = "AOB934RVNwzk6xtn"

// newProvider is a provider on a stripe-mock started for the test, through a fault layer
// (testCards: answering as Stripe's test cards would).
func newProvider(t *testing.T, testCards bool) (*stripe.Provider, *stripetest.Layer) {
	t.Helper()
	base := stripetest.Start(t)
	layer := &stripetest.Layer{TestCards: testCards}
	return providerOn(t, base, stripetest.SecretKey, layer.Client()), layer
}

func providerOn(t *testing.T, base, key string, hc *http.Client) *stripe.Provider {
	t.Helper()
	p, err := stripe.New(stripe.Options{SecretKey: key, APIBase: base, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func chargeRequest(key, token string) psp.ChargeRequest {
	return psp.ChargeRequest{Key: key, Amount: 1234, Currency: "EUR", CardToken: token, Description: "order ord_" + key}
}

// TestStripeMockCharge: a charge's request is one Stripe accepts (stripe-mock checks it
// against Stripe's API description) and its answer is read into tekrar's charge, the card's
// fingerprint included. The bare fixture is a PaymentIntent still waiting for a payment
// method, which is no outcome.
func TestStripeMockCharge(t *testing.T) {
	ctx := context.Background()
	p, layer := newProvider(t, true)
	c, err := p.Charge(ctx, chargeRequest("k1", "pm_card_visa"))
	if err != nil {
		t.Fatalf("Charge: %v", err)
	}
	if c.Status != psp.StatusSucceeded || c.ID == "" || c.Key != "k1" || c.Amount != 1234 || c.Currency != "EUR" ||
		c.Description != "order ord_k1" || c.CardFingerprint != mockFingerprint || c.CardLast4 != "4242" || c.CardBrand != "visa" {
		t.Errorf("Charge = %+v; want a succeeded charge of 1234 EUR under k1 with the fixture's card", c)
	}
	if n := layer.Served(http.MethodPost, "/v1/payment_intents"); n != 1 {
		t.Errorf("the mock saw %d creates, want 1", n)
	}

	bare, _ := newProvider(t, false)
	_, err = bare.Charge(ctx, chargeRequest("k2", "pm_card_visa"))
	if !errors.Is(err, stripe.ErrNotFinal) || !psp.IsOutcomeUnknown(err) {
		t.Errorf("Charge answered by the bare fixture: %v; want ErrNotFinal, outcome unknown", err)
	}
}

// TestStripeMockDecline: a card_error is a declined charge, a result, on the PaymentIntent
// the error names.
func TestStripeMockDecline(t *testing.T) {
	p, _ := newProvider(t, true)
	c, err := p.Charge(context.Background(), chargeRequest("k1", "pm_card_chargeDeclined"))
	if err != nil {
		t.Fatalf("Charge: %v", err)
	}
	if c.Status != psp.StatusDeclined || c.DeclineCode != "generic_decline" || c.ID == "" || c.Key != "k1" {
		t.Errorf("Charge = %+v; want declined with generic_decline", c)
	}
}

// TestStripeMockRefund: a refund of a PaymentIntent under its key.
func TestStripeMockRefund(t *testing.T) {
	ctx := context.Background()
	p, layer := newProvider(t, false)
	r, err := p.Refund(ctx, psp.RefundRequest{Key: "r1", ChargeID: "pi_123", Amount: 100, Reason: "customer asked"})
	if err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if r.ID == "" || r.Key != "r1" || r.ChargeID != "pi_123" || r.Amount != 100 || r.Status != psp.RefundSucceeded {
		t.Errorf("Refund = %+v", r)
	}
	again, err := p.Refund(ctx, psp.RefundRequest{Key: "r1", ChargeID: "pi_123", Amount: 100, Reason: "customer asked"})
	if err != nil || again.ID != r.ID || layer.Served(http.MethodPost, "/v1/refunds") != 1 {
		t.Errorf("Refund repeated under its key = %+v, %v (mock saw %d); want the first refund, one request",
			again, err, layer.Served(http.MethodPost, "/v1/refunds"))
	}
	// Stripe's refunds carry the key in their metadata; the fixture's carry none.
	if _, err := p.LookupRefund(ctx, "r1"); !errors.Is(err, psp.ErrNotFound) {
		t.Errorf("LookupRefund of a key no listed refund carries = %v, want ErrNotFound", err)
	}
}

// TestStripeMockCancel: the fence finds the PaymentIntent by its key's metadata and cancels
// it; a key whose PaymentIntent the search does not find cannot be fenced.
func TestStripeMockCancel(t *testing.T) {
	ctx := context.Background()
	p, layer := newProvider(t, true)
	c, err := p.CancelCharge(ctx, "k1")
	if err != nil {
		t.Fatalf("CancelCharge: %v", err)
	}
	if c.Status != psp.StatusCanceled || c.ID == "" || c.Key != "k1" || c.Amount != 0 {
		t.Errorf("CancelCharge = %+v; want canceled, holding nothing", c)
	}
	if layer.Served(http.MethodGet, "/v1/payment_intents/search") != 1 || layer.Served(http.MethodPost, "/v1/payment_intents/"+c.ID+"/cancel") != 1 {
		t.Errorf("want one search and one cancel of %s", c.ID)
	}

	bare, _ := newProvider(t, false) // the fixture carries no metadata: nothing is found
	if _, err := bare.CancelCharge(ctx, "k1"); !errors.Is(err, psp.ErrCancelUnsupported) {
		t.Errorf("CancelCharge with nothing found = %v, want ErrCancelUnsupported", err)
	}
	if _, err := bare.LookupCharge(ctx, "k1"); !errors.Is(err, psp.ErrLookupUnsupported) {
		t.Errorf("LookupCharge = %v, want ErrLookupUnsupported", err)
	}
	if got, err := bare.ChargesByReference(ctx, "order ord_1"); err != nil || len(got) != 0 {
		t.Errorf("ChargesByReference with nothing found = %+v, %v; want none", got, err)
	}
}

// TestStripeMockList: a window's PaymentIntents with an outcome, paged oldest first.
func TestStripeMockList(t *testing.T) {
	ctx := context.Background()
	p, _ := newProvider(t, true)
	window := psp.ChargeListQuery{Since: mockFixtureCreated.Add(-time.Hour), Until: mockFixtureCreated.Add(time.Hour), Limit: 10}
	page, err := p.ListCharges(ctx, window)
	if err != nil {
		t.Fatalf("ListCharges: %v", err)
	}
	if len(page.Charges) != 1 || page.Charges[0].Status != psp.StatusSucceeded || page.Next != "" {
		t.Fatalf("ListCharges = %+v; want the fixture's one charge, one page", page)
	}
	window.After = page.Charges[0].ID
	if next, err := p.ListCharges(ctx, window); err != nil || len(next.Charges) != 0 {
		t.Errorf("the page after the last = %+v, %v; want none", next, err)
	}
	window.After = "pi_unknown"
	if _, err := p.ListCharges(ctx, window); !errors.Is(err, psp.ErrNotFound) {
		t.Errorf("a page after an unknown charge: %v, want ErrNotFound", err)
	}
	later := psp.ChargeListQuery{Since: time.Now().Add(-time.Hour), Until: time.Now()}
	if page, err := p.ListCharges(ctx, later); err != nil || len(page.Charges) != 0 {
		t.Errorf("a window without the fixture = %+v, %v; want none", page, err)
	}
}

// TestStripeMockCardFingerprint: a PaymentMethod's card.fingerprint, whether the token is
// a PaymentMethod or a card token.
func TestStripeMockCardFingerprint(t *testing.T) {
	p, _ := newProvider(t, false)
	for _, token := range []string{"pm_card_visa", "tok_visa"} {
		fp, err := p.CardFingerprint(context.Background(), token)
		if err != nil || fp != mockFingerprint {
			t.Errorf("CardFingerprint(%s) = %q, %v; want %s", token, fp, err, mockFingerprint)
		}
	}
}

// TestStripeMockErrors: the errors stripe-mock itself answers.
func TestStripeMockErrors(t *testing.T) {
	ctx := context.Background()
	base := stripetest.Start(t)
	wrongKey := providerOn(t, base, "sk_wrong", nil)
	if _, err := wrongKey.Charge(ctx, chargeRequest("k1", "pm_card_visa")); err == nil || !psp.IsOutcomeUnknown(err) {
		t.Errorf("Charge with a refused secret key = %v; want an error that leaves the outcome unknown", err)
	}
	down := providerOn(t, "http://127.0.0.1:1", stripetest.SecretKey, nil)
	if _, err := down.Charge(ctx, chargeRequest("k3", "pm_card_visa")); err == nil || !psp.IsOutcomeUnknown(err) {
		t.Errorf("Charge with Stripe unreachable = %v; want outcome unknown", err)
	}
}
