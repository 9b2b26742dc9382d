package checkout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp"
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
