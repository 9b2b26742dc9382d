package psptest

import (
	"context"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp"
)

// Charge charges p directly under key, as a charge tekrar never completed (made by hand at
// the provider, or by a client of another system), with the visa test card, and returns it.
// It fails t unless the charge succeeded.
func Charge(t testing.TB, p psp.Provider, key, description string, amount int64) psp.Charge {
	t.Helper()
	ch, err := p.Charge(context.Background(), psp.ChargeRequest{Key: key, Amount: amount, Currency: "TRY",
		CardToken: psp.TokenVisa, Description: description})
	if err != nil || ch.Status != psp.StatusSucceeded {
		t.Fatalf("charge %s: %+v %v", key, ch, err)
	}
	return ch
}
