package psptest

import (
	"context"
	"maps"
	"sync"

	"github.com/tekrar/tekrar/checkout/psp"
)

// Counting is a provider (the sandbox, in tests) that counts the calls made to it, by
// operation (OpCharge, OpCardFingerprint, …): what a test of how many provider round trips
// a request costs reads.
type Counting struct {
	psp.Provider
	mu    sync.Mutex
	calls map[string]int
}

func (p *Counting) count(op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[op]++
}

// Calls returns the calls counted since the last Reset, by operation; an operation not
// called is absent.
func (p *Counting) Calls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// Reset forgets the calls counted so far.
func (p *Counting) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = nil
}

func (p *Counting) Charge(ctx context.Context, req psp.ChargeRequest) (psp.Charge, error) {
	p.count(OpCharge)
	return p.Provider.Charge(ctx, req)
}

func (p *Counting) Refund(ctx context.Context, req psp.RefundRequest) (psp.Refund, error) {
	p.count(OpRefund)
	return p.Provider.Refund(ctx, req)
}

func (p *Counting) LookupCharge(ctx context.Context, key string) (psp.Charge, error) {
	p.count(OpLookupCharge)
	return p.Provider.LookupCharge(ctx, key)
}

func (p *Counting) LookupRefund(ctx context.Context, key string) (psp.Refund, error) {
	p.count(OpLookupRefund)
	return p.Provider.LookupRefund(ctx, key)
}

func (p *Counting) CancelCharge(ctx context.Context, key string) (psp.Charge, error) {
	p.count(OpCancelCharge)
	return p.Provider.CancelCharge(ctx, key)
}

func (p *Counting) ListCharges(ctx context.Context, q psp.ChargeListQuery) (psp.ChargePage, error) {
	p.count(OpListCharges)
	return p.Provider.ListCharges(ctx, q)
}

func (p *Counting) CardFingerprint(ctx context.Context, token string) (string, error) {
	p.count(OpCardFingerprint)
	return p.Provider.CardFingerprint(ctx, token)
}

// Capability is the wrapped provider's row: what it promises is not a call.
func (p *Counting) Capability() psp.Capability { return psp.PromisesOf(p.Provider) }

func (p *Counting) ChargesByReference(ctx context.Context, reference string) ([]psp.Charge, error) {
	p.count(OpChargesByReference)
	return psp.ChargesByReference(ctx, p.Provider, reference)
}
