package psptest

import (
	"context"
	"sync"

	"github.com/tekrar/tekrar/checkout/psp"
)

// The operations Answering forces, named as psp's tables of provider answers name
// them (docs/providers.md).
const (
	OpCharge          = "charge"
	OpRefund          = "refund"
	OpLookupCharge    = "lookup_charge"
	OpLookupRefund    = "lookup_refund"
	OpCancelCharge    = "cancel_charge"
	OpListCharges     = "list_charges"
	OpCardFingerprint = "card_fingerprint"
	// OpChargesByReference is a look-up by reference (psp.ReferenceFinder), which answers as
	// a charge look-up does.
	OpChargesByReference = "charges_by_reference"
)

// Answering is a provider (the sandbox, in tests) with the answer of each operation forced:
// a forced error is answered without asking the provider, as a provider that refused (or
// failed before doing anything) would.
type Answering struct {
	psp.Provider
	mu     sync.Mutex
	answer map[string]error // by operation (OpCharge, OpRefund, …)
}

// Force makes op answer err from now on; a nil err lets the provider answer again.
func (p *Answering) Force(op string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answer == nil {
		p.answer = map[string]error{}
	}
	p.answer[op] = err
}

func (p *Answering) forced(op string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answer[op]
}

func (p *Answering) Charge(ctx context.Context, req psp.ChargeRequest) (psp.Charge, error) {
	if err := p.forced(OpCharge); err != nil {
		return psp.Charge{}, err
	}
	return p.Provider.Charge(ctx, req)
}

func (p *Answering) LookupCharge(ctx context.Context, key string) (psp.Charge, error) {
	if err := p.forced(OpLookupCharge); err != nil {
		return psp.Charge{}, err
	}
	return p.Provider.LookupCharge(ctx, key)
}

func (p *Answering) CancelCharge(ctx context.Context, key string) (psp.Charge, error) {
	if err := p.forced(OpCancelCharge); err != nil {
		return psp.Charge{}, err
	}
	return p.Provider.CancelCharge(ctx, key)
}

func (p *Answering) LookupRefund(ctx context.Context, key string) (psp.Refund, error) {
	if err := p.forced(OpLookupRefund); err != nil {
		return psp.Refund{}, err
	}
	return p.Provider.LookupRefund(ctx, key)
}

func (p *Answering) CardFingerprint(ctx context.Context, token string) (string, error) {
	if err := p.forced(OpCardFingerprint); err != nil {
		return "", err
	}
	return p.Provider.CardFingerprint(ctx, token)
}

func (p *Answering) ListCharges(ctx context.Context, q psp.ChargeListQuery) (psp.ChargePage, error) {
	if err := p.forced(OpListCharges); err != nil {
		return psp.ChargePage{}, err
	}
	return p.Provider.ListCharges(ctx, q)
}

func (p *Answering) Refund(ctx context.Context, req psp.RefundRequest) (psp.Refund, error) {
	if err := p.forced(OpRefund); err != nil {
		return psp.Refund{}, err
	}
	return p.Provider.Refund(ctx, req)
}

// Capability is the wrapped provider's row.
func (p *Answering) Capability() psp.Capability { return psp.PromisesOf(p.Provider) }

func (p *Answering) ChargesByReference(ctx context.Context, reference string) ([]psp.Charge, error) {
	if err := p.forced(OpChargesByReference); err != nil {
		return nil, err
	}
	return psp.ChargesByReference(ctx, p.Provider, reference)
}
