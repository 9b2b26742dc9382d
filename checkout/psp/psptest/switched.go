// Package psptest holds providers for tests: a provider whose calls fail, or whose answers
// are lost, at a test's word.
package psptest

import (
	"context"
	"errors"
	"sync"

	"github.com/tekrar/tekrar/checkout/psp"
)

// Switched is a provider (the sandbox, in tests) behind a switch, to put a key in every
// state an operator meets: "down" fails every call before it reaches the provider (nothing
// happens there), "lost" lets a charge, refund or cancel happen and loses its answer. Either
// way the caller cannot tell what happened. Set it before the calls it is for.
type Switched struct {
	psp.Provider
	mu   sync.Mutex
	mode string // "", "down" or "lost"
}

// Set switches the provider to mode: "" (it answers), "down" or "lost".
func (p *Switched) Set(mode string) { p.mu.Lock(); p.mode = mode; p.mu.Unlock() }

func (p *Switched) get() string { p.mu.Lock(); defer p.mu.Unlock(); return p.mode }

// ErrUnreachable is the answer of every call while the switch is "down".
var ErrUnreachable = errors.New("provider unreachable")

func (p *Switched) Charge(ctx context.Context, req psp.ChargeRequest) (psp.Charge, error) {
	if p.get() == "down" {
		return psp.Charge{}, ErrUnreachable
	}
	ch, err := p.Provider.Charge(ctx, req)
	if p.get() == "lost" {
		return psp.Charge{}, errors.New("answer lost")
	}
	return ch, err
}

func (p *Switched) Refund(ctx context.Context, req psp.RefundRequest) (psp.Refund, error) {
	if p.get() == "down" {
		return psp.Refund{}, ErrUnreachable
	}
	r, err := p.Provider.Refund(ctx, req)
	if p.get() == "lost" {
		return psp.Refund{}, errors.New("answer lost")
	}
	return r, err
}

func (p *Switched) LookupCharge(ctx context.Context, key string) (psp.Charge, error) {
	if p.get() == "down" {
		return psp.Charge{}, ErrUnreachable
	}
	return p.Provider.LookupCharge(ctx, key)
}

func (p *Switched) CancelCharge(ctx context.Context, key string) (psp.Charge, error) {
	if p.get() == "down" {
		return psp.Charge{}, ErrUnreachable
	}
	ch, err := p.Provider.CancelCharge(ctx, key)
	if p.get() == "lost" {
		return psp.Charge{}, errors.New("answer lost")
	}
	return ch, err
}

func (p *Switched) ListCharges(ctx context.Context, q psp.ChargeListQuery) (psp.ChargePage, error) {
	if p.get() == "down" {
		return psp.ChargePage{}, ErrUnreachable
	}
	return p.Provider.ListCharges(ctx, q)
}

func (p *Switched) LookupRefund(ctx context.Context, key string) (psp.Refund, error) {
	if p.get() == "down" {
		return psp.Refund{}, ErrUnreachable
	}
	return p.Provider.LookupRefund(ctx, key)
}

// Capability is the wrapped provider's row, whatever the switch: a provider that is down
// promises what it promised.
func (p *Switched) Capability() psp.Capability { return psp.PromisesOf(p.Provider) }

func (p *Switched) ChargesByReference(ctx context.Context, reference string) ([]psp.Charge, error) {
	if p.get() == "down" {
		return nil, ErrUnreachable
	}
	return psp.ChargesByReference(ctx, p.Provider, reference)
}
