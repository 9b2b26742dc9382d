package psp

import (
	"errors"
	"strings"
	"testing"
)

// TestCardFingerprint: every token of one card has that card's fingerprint, tokens of
// different cards have different ones, a token of no card is not found, and a re-tokenized
// card charges as its card does.
func TestCardFingerprint(t *testing.T) {
	forEachProvider(t, SandboxOptions{}, func(t *testing.T, p Provider, sb *Sandbox) {
		ctx := testContext(t)
		fp := func(token string) string {
			t.Helper()
			f, err := p.CardFingerprint(ctx, token)
			if err != nil {
				t.Fatalf("CardFingerprint(%q): %v", token, err)
			}
			if !strings.HasPrefix(f, "fp_") || len(f) != 27 {
				t.Fatalf("CardFingerprint(%q) = %q, want fp_ and 24 hex digits", token, f)
			}
			return f
		}
		visa := fp(TokenVisa)
		for _, same := range []string{"tok_visa_1", "tok_visa_2f9c", "tok_visa__"} {
			if got := fp(same); got != visa {
				t.Errorf("%s: %s, want tok_visa's %s", same, got, visa)
			}
		}
		seen := map[string]string{}
		for _, tok := range magicTokens {
			f := fp(tok)
			if other, ok := seen[f]; ok {
				t.Errorf("%s and %s share the fingerprint %s", tok, other, f)
			}
			seen[f] = tok
		}
		for _, unknown := range []string{"tok_nobody_knows", "tok_visa_", "tok_visas", "tok_vis"} {
			if f, err := p.CardFingerprint(ctx, unknown); !errors.Is(err, ErrNotFound) {
				t.Errorf("CardFingerprint(%q) = %q, %v; want ErrNotFound", unknown, f, err)
			}
		}
		if _, err := p.CardFingerprint(ctx, ""); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("empty token: %v, want ErrInvalidRequest", err)
		}

		c := mustCharge(t, p, ChargeRequest{Key: "retoken-1", Amount: 500, Currency: "EUR", CardToken: "tok_mastercard_a1"})
		if c.Status != StatusSucceeded || c.CardBrand != "mastercard" || c.CardLast4 != "4444" {
			t.Errorf("a new token of tok_mastercard charged %+v", c)
		}
		d := mustCharge(t, p, ChargeRequest{Key: "retoken-2", Amount: 500, Currency: "EUR", CardToken: "tok_declined_a1"})
		if d.Status != StatusDeclined || d.DeclineCode != DeclineCardDeclined {
			t.Errorf("a new token of tok_declined charged %+v", d)
		}

		// A charge's answer, first or replayed, names its card as CardFingerprint does: an
		// order needs no look-up of its own. A token of no card has none.
		if c.CardFingerprint != fp(TokenMastercard) || d.CardFingerprint != fp(TokenDeclined) {
			t.Errorf("charge answers name cards %q and %q", c.CardFingerprint, d.CardFingerprint)
		}
		again := mustCharge(t, p, ChargeRequest{Key: "retoken-1", Amount: 500, Currency: "EUR", CardToken: "tok_mastercard_a1"})
		if again.ID != c.ID || again.CardFingerprint != c.CardFingerprint {
			t.Errorf("replayed charge %+v, first %+v", again, c)
		}
		u := mustCharge(t, p, ChargeRequest{Key: "retoken-3", Amount: 500, Currency: "EUR", CardToken: "tok_nobody_knows"})
		if u.Status != StatusDeclined || u.CardFingerprint != "" {
			t.Errorf("a token of no card charged %+v", u)
		}
	})
}
