package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/stripe"
	"github.com/tekrar/tekrar/checkout/psp/stripe/stripetest"
)

// What stripe-mock cannot show, shown through the fault layer in front of it: what
// Stripe's keys do with a repeat, and what a network does to an answer.

// TestLostAnswerRepeatedUnderItsKey: a charge whose answer is lost leaves the outcome
// unknown; repeated under its key it is answered by the first answer, and Stripe made one
// PaymentIntent.
func TestLostAnswerRepeatedUnderItsKey(t *testing.T) {
	ctx := context.Background()
	p, layer := newProvider(t, true)
	layer.Inject(http.MethodPost, "/v1/payment_intents", stripetest.LoseAnswer)
	req := chargeRequest("k1", "pm_card_visa")
	if _, err := p.Charge(ctx, req); !psp.IsOutcomeUnknown(err) || !errors.Is(err, stripetest.ErrAnswerLost) {
		t.Fatalf("Charge with its answer lost = %v; want the outcome unknown", err)
	}
	first, err := p.Charge(ctx, req)
	if err != nil || first.Status != psp.StatusSucceeded {
		t.Fatalf("the repeat = %+v, %v; want the first charge", first, err)
	}
	again, err := p.Charge(ctx, req)
	if err != nil || again.ID != first.ID {
		t.Errorf("another repeat = %+v, %v; want %s", again, err, first.ID)
	}
	if n := layer.Served(http.MethodPost, "/v1/payment_intents"); n != 1 {
		t.Errorf("the mock saw %d creates, want 1", n)
	}
}

// TestServerErrorReplayedUnderItsKey: Stripe saves a 500 under its key, so a repeat is
// answered by the same 500 and settles nothing: only a look-up (by reference) can.
func TestServerErrorReplayedUnderItsKey(t *testing.T) {
	ctx := context.Background()
	p, layer := newProvider(t, true)
	layer.Inject(http.MethodPost, "/v1/payment_intents", stripetest.Answer500)
	req := chargeRequest("k1", "pm_card_visa")
	for i := range 3 {
		_, err := p.Charge(ctx, req)
		if !psp.IsOutcomeUnknown(err) || errors.Is(err, stripe.ErrRetrySameKey) {
			t.Fatalf("attempt %d under the key = %v; want the saved 500, outcome unknown", i+1, err)
		}
	}
	if n := layer.Served(http.MethodPost, "/v1/payment_intents"); n != 1 {
		t.Errorf("the mock saw %d creates, want 1 (the repeats replayed)", n)
	}
	if _, err := p.LookupCharge(ctx, req.Key); !errors.Is(err, psp.ErrLookupUnsupported) {
		t.Errorf("LookupCharge = %v; want ErrLookupUnsupported (the row finds charges by reference)", err)
	}
}

// TestRateLimitedRetriedUnderItsKey: a 429 with Stripe-Should-Retry: true reaches nothing
// and keeps nothing; the same key sent again is served.
func TestRateLimitedRetriedUnderItsKey(t *testing.T) {
	ctx := context.Background()
	p, layer := newProvider(t, true)
	layer.Inject(http.MethodPost, "/v1/payment_intents", stripetest.Answer429)
	req := chargeRequest("k1", "pm_card_visa")
	if _, err := p.Charge(ctx, req); !errors.Is(err, stripe.ErrRetrySameKey) || !psp.IsOutcomeUnknown(err) {
		t.Fatalf("Charge rate-limited = %v; want ErrRetrySameKey, outcome unknown", err)
	}
	if n := layer.Served(http.MethodPost, "/v1/payment_intents"); n != 0 {
		t.Errorf("the mock saw %d creates, want 0", n)
	}
	if c, err := p.Charge(ctx, req); err != nil || c.Status != psp.StatusSucceeded {
		t.Errorf("the retry under the key = %+v, %v; want succeeded", c, err)
	}
}

// TestKeyReusedWithOtherParameters: Stripe's idempotency_error is ErrKeyReused.
func TestKeyReusedWithOtherParameters(t *testing.T) {
	ctx := context.Background()
	p, _ := newProvider(t, true)
	req := chargeRequest("k1", "pm_card_visa")
	if _, err := p.Charge(ctx, req); err != nil {
		t.Fatal(err)
	}
	req.Amount++
	if _, err := p.Charge(ctx, req); !errors.Is(err, psp.ErrKeyReused) {
		t.Errorf("Charge under the key with another amount = %v, want ErrKeyReused", err)
	}
}
