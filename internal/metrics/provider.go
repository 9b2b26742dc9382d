package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
)

// Provider wraps a payment provider so that every call is counted and timed by operation
// and outcome. The domain sees the provider it wrapped, unchanged: the wrapper says what the
// wrapped provider promises (psp.Promiser) and finds charges by reference as it does
// (psp.ReferenceFinder), since recovery decides from both and a wrapper that hid them would
// make it re-send or look up as another provider.
func (m *Metrics) Provider(p psp.Provider) psp.Provider { return &provider{next: p, m: m} }

var (
	_ psp.Promiser        = (*provider)(nil)
	_ psp.ReferenceFinder = (*provider)(nil)
)

type provider struct {
	next psp.Provider
	m    *Metrics
}

func (p *provider) observe(op string, start time.Time, status string, err error) {
	p.m.provider.WithLabelValues(op, providerOutcome(status, err)).Observe(time.Since(start).Seconds())
}

// providerOutcome names a call's outcome from a small fixed set: the charge's status when
// it answered with one, else the kind of error.
func providerOutcome(status string, err error) string {
	switch {
	case err == nil && (status == psp.StatusSucceeded || status == psp.StatusDeclined || status == psp.StatusCanceled):
		return status
	case err == nil:
		return "ok"
	case errors.Is(err, psp.ErrNotFound):
		return "not_found"
	case errors.Is(err, psp.ErrKeyCanceled):
		return "key_canceled"
	case errors.Is(err, psp.ErrCancelUnsupported):
		return "cancel_unsupported"
	case errors.Is(err, psp.ErrKeyReused), errors.Is(err, psp.ErrRefundExceedsCharge),
		errors.Is(err, psp.ErrNotRefundable), errors.Is(err, psp.ErrInvalidRequest):
		return "refused"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout"
	}
	return "error" // the outcome is unknown: the provider failed or could not be reached
}

func (p *provider) Charge(ctx context.Context, req psp.ChargeRequest) (psp.Charge, error) {
	start := time.Now()
	c, err := p.next.Charge(ctx, req)
	p.observe("charge", start, c.Status, err)
	return c, err
}

func (p *provider) Refund(ctx context.Context, req psp.RefundRequest) (psp.Refund, error) {
	start := time.Now()
	r, err := p.next.Refund(ctx, req)
	p.observe("refund", start, "", err)
	return r, err
}

func (p *provider) LookupCharge(ctx context.Context, key string) (psp.Charge, error) {
	start := time.Now()
	c, err := p.next.LookupCharge(ctx, key)
	p.observe("lookup_charge", start, c.Status, err)
	return c, err
}

func (p *provider) LookupRefund(ctx context.Context, key string) (psp.Refund, error) {
	start := time.Now()
	r, err := p.next.LookupRefund(ctx, key)
	p.observe("lookup_refund", start, "", err)
	return r, err
}

func (p *provider) CancelCharge(ctx context.Context, key string) (psp.Charge, error) {
	start := time.Now()
	c, err := p.next.CancelCharge(ctx, key)
	p.observe("cancel_charge", start, c.Status, err)
	return c, err
}

func (p *provider) ListCharges(ctx context.Context, q psp.ChargeListQuery) (psp.ChargePage, error) {
	start := time.Now()
	page, err := p.next.ListCharges(ctx, q)
	p.observe("list_charges", start, "", err)
	return page, err
}

func (p *provider) CardFingerprint(ctx context.Context, token string) (string, error) {
	start := time.Now()
	fp, err := p.next.CardFingerprint(ctx, token)
	p.observe("card_fingerprint", start, "", err)
	return fp, err
}

// Capability is the wrapped provider's row (psp.PromisesOf): not a call, so not counted.
func (p *provider) Capability() psp.Capability { return psp.PromisesOf(p.next) }

func (p *provider) ChargesByReference(ctx context.Context, reference string) ([]psp.Charge, error) {
	start := time.Now()
	cs, err := psp.ChargesByReference(ctx, p.next, reference)
	p.observe("charges_by_reference", start, "", err)
	return cs, err
}
