package checkout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
)

// inFlightProvider is the sandbox seen while a key's first attempt is still being
// processed: the first attempt's charge (token suffix "_1") is made but its answer lost,
// and LookupCharge misses it as many times as hide says.
type inFlightProvider struct {
	psp.Provider
	hide atomic.Int32
}

func (p *inFlightProvider) Charge(ctx context.Context, req psp.ChargeRequest) (psp.Charge, error) {
	ch, err := p.Provider.Charge(ctx, req)
	if strings.HasSuffix(req.CardToken, "_1") {
		return psp.Charge{}, errors.New("answer lost")
	}
	return ch, err
}

func (p *inFlightProvider) LookupCharge(ctx context.Context, key string) (psp.Charge, error) {
	if p.hide.Add(-1) >= 0 {
		return psp.Charge{}, fmt.Errorf("%w: still being processed", psp.ErrNotFound)
	}
	return p.Provider.LookupCharge(ctx, key)
}

// TestRetokenizedResumeMeetsTheFirstCharge: a retry with a new token of the same card
// resumes a key whose first charge the provider had not recorded yet when the retry
// looked; charging the new token under the same provider key is refused there (another
// token), and the first charge, by then recorded, becomes the order's: paid, once.
func TestRetokenizedResumeMeetsTheFirstCharge(t *testing.T) {
	e := newActionEnv(t)
	p := &inFlightProvider{Provider: e.p.Provider}
	e.s.provider = p
	if _, status := e.order("k-inflight", "tok_visa_1", 4500); status != 503 {
		t.Fatalf("first attempt: %d, want 503 (answer lost)", status)
	}
	p.hide.Store(1)
	order, status := e.order("k-inflight", "tok_visa_2", 4500)
	if status != 201 {
		t.Fatalf("retry with a new token of the card: %d, want 201", status)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if st := e.str(`SELECT status FROM orders WHERE public_id = $1`, order); st != "paid" {
		t.Fatalf("order %s", st)
	}
}

// TestCardFromTheChargeOneProviderCall: a first arrival makes one provider call, its
// charge, whose answer names the card the key keeps; a replay with the first token makes
// none; only a re-tokenized retry asks which card its token is, and is recognised by it.
func TestCardFromTheChargeOneProviderCall(t *testing.T) {
	e := newActionEnv(t)
	p := &psptest.Counting{Provider: e.p.Provider}
	e.p.Provider = p
	calls := func(step string, want map[string]int) {
		t.Helper()
		if got := p.Calls(); !maps.Equal(got, want) {
			t.Errorf("%s: provider calls %v, want %v", step, got, want)
		}
		p.Reset()
	}
	order, status := e.order("k-one", "tok_visa_1", 4500)
	if status != 201 {
		t.Fatalf("first arrival: %d", status)
	}
	calls("first arrival", map[string]int{psptest.OpCharge: 1})
	visa, err := e.p.Provider.CardFingerprint(context.Background(), psp.TokenVisa)
	if err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if card := e.str(`SELECT coalesce(card_fingerprint, '') FROM idempotency_keys WHERE key = 'k-one'`); card != visa {
		t.Fatalf("the key keeps the card %q, want the charge's %q", card, visa)
	}

	for _, tc := range []struct {
		token  string
		status int
		calls  map[string]int
	}{
		{"tok_visa_1", 201, nil}, // the same token: a replay, the provider not asked
		{"tok_visa_2", 201, map[string]int{psptest.OpCardFingerprint: 1}}, // a new token of the card: asked once, a replay
		{"tok_mastercard_2", 422, map[string]int{psptest.OpCardFingerprint: 1}},
		{"tok_nobody", 422, map[string]int{psptest.OpCardFingerprint: 1}},
	} {
		got, status := e.order("k-one", tc.token, 4500)
		if status != tc.status || got != order {
			t.Errorf("retry with %s: %d for %s, want %d for %s", tc.token, status, got, tc.status, order)
		}
		calls("retry with "+tc.token, tc.calls)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges`); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

// Capability is the sandbox's row: the wrapper changes answers, not promises.
func (p *inFlightProvider) Capability() psp.Capability { return psp.PromisesOf(p.Provider) }
