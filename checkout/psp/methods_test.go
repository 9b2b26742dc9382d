package psp

import (
	"errors"
	"testing"
)

// TestSavedPaymentMethods: a charge on a customer's saved card, in process and over HTTP.
// The card behaves as the token it was saved from; the method is read at the charge, so a
// replaced card meets later keys only; a repeated key answers its first charge, and with
// another method is refused; another customer's method declines as an invalid card.
func TestSavedPaymentMethods(t *testing.T) {
	t.Parallel()
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		ctx := testContext(t)
		visa, err := sb.SavePaymentMethod(ctx, "cus_1", TokenVisa)
		if err != nil || visa.CardLast4 != "4242" {
			t.Fatalf("save: %+v %v", visa, err)
		}
		other, err := sb.SavePaymentMethod(ctx, "cus_1", TokenMastercard)
		if err != nil {
			t.Fatal(err)
		}
		req := ChargeRequest{Key: "k-1", Amount: 500, Currency: "TRY", Customer: "cus_1", PaymentMethod: visa.ID}
		ch, err := p.Charge(ctx, req)
		if err != nil || ch.Status != StatusSucceeded || ch.CardLast4 != "4242" {
			t.Fatalf("charge: %+v %v", ch, err)
		}
		if err := sb.ReplacePaymentMethodCard(ctx, visa.ID, TokenDeclined); err != nil {
			t.Fatal(err)
		}
		again, err := p.Charge(ctx, req)
		if err != nil || again.ID != ch.ID || again.Status != StatusSucceeded {
			t.Errorf("the same key after the card was replaced: %+v %v, want the first charge", again, err)
		}
		req.Key = "k-2"
		if d, err := p.Charge(ctx, req); err != nil || d.Status != StatusDeclined || d.DeclineCode != DeclineCardDeclined {
			t.Errorf("a new key on the replaced card: %+v %v, want declined", d, err)
		}
		req.PaymentMethod = other.ID
		if _, err := p.Charge(ctx, req); !errors.Is(err, ErrKeyReused) {
			t.Errorf("key k-2 with another method: %v, want ErrKeyReused", err)
		}
		req = ChargeRequest{Key: "k-3", Amount: 500, Currency: "TRY", Customer: "cus_2", PaymentMethod: other.ID}
		if d, err := p.Charge(ctx, req); err != nil || d.Status != StatusDeclined || d.DeclineCode != DeclineInvalidCard {
			t.Errorf("another customer's method: %+v %v, want declined invalid_card", d, err)
		}
		for _, bad := range []ChargeRequest{
			{Key: "k-4", Amount: 500, Currency: "TRY", CardToken: TokenVisa, Customer: "cus_1", PaymentMethod: visa.ID},
			{Key: "k-5", Amount: 500, Currency: "TRY", PaymentMethod: visa.ID},
		} {
			if _, err := p.Charge(ctx, bad); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("%+v: %v, want ErrInvalidRequest", bad, err)
			}
		}
		if _, err := sb.SavePaymentMethod(ctx, "cus_1", TokenFail); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("saving tok_fail: %v, want ErrInvalidRequest", err)
		}
	})
}
