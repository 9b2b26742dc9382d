package checkout

// The entries of the roles beside the domain that work on keys: the operator's actions
// (checkout/operator) and the completer (checkout/completer). Each wraps a piece of the
// root that stays unexported (settling an order or a refund from what the provider
// recorded is the domain's), so that a role reaches exactly what it needs and the root
// keeps one copy of every statement. A role that needs only a key statement (read, lock,
// expire, take from attention, list the abandoned, release a lease) calls the engine
// (checkout/internal/keyed) itself; TakeOver stays here for the service's lease.

import (
	"context"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
)

// Now is the service's clock (Config.Now). The operator's expire action and the completer
// stamp what they do by it, so that a test's clock holds for them as for the service.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// RefundRequest is the keyed request of POST /v1/orders/{id}/refunds for orderID as the API
// would send it (method, path, and the longest wait Prefer may ask): the operator's refund
// goes through the very door of an API refund, and fills in the client, key, body and meta.
func (s *Service) RefundRequest(orderID string) Request {
	return Request{Method: s.cfg.Routes.Refund.Method, Path: s.cfg.Routes.RefundPath(orderID), Wait: s.cfg.MaxWait}
}

// PendingRefund reads back the refund of the client's key as pending: the operator's
// refund whose provider outcome is unknown.
func (s *Service) PendingRefund(ctx context.Context, clientID int64, key string) (RefundView, error) {
	k, err := keyed.Get(ctx, s.db, clientID, key)
	if err != nil {
		return RefundView{}, err
	}
	ref, err := loadRefund(ctx, s.db, k.RefundID.Int64)
	if err != nil {
		return RefundView{}, err
	}
	return ref.view("pending"), nil
}

// ChargeResolution is what the provider recorded of a key's charge, and how to settle the
// key's order from it.
type ChargeResolution struct {
	// Settle settles the order (paid, declined, or canceled) and completes the key, fenced by
	// its lease token, on db (nil: the service's pool); it returns the charge it settled
	// from (status canceled when the order was canceled). Nil when the provider could not
	// tell: Err is then what it answered.
	Settle func(db sqlx.QueryerContext) (psp.Charge, error)
	Err    error
	// Unknown: the provider's outcome is unknown, and asking again may do better. Otherwise
	// it refused what tekrar derived, which a person has to look into.
	Unknown bool
	// LookupRefused: the provider refused the look-up itself; no later pass will do better.
	LookupRefused bool
}

// ResolveCharge asks the provider about k's charge, the way the provider can find it
// (FindCharge: under the key's providerKey, by the order's reference, or in a listing) as
// every resume does, for the completer and the operator's release, which never charge (card
// tokens are not stored). A charge found settles the order from it; none found yet is not
// none ever (the worker that lost the key may still have its request in flight), so the
// key is fenced at the provider first (giveUpCharge, with reason for a refund owed). The
// settlement runs on ctx.
func (s *Service) ResolveCharge(ctx context.Context, k *Key, reason string) ChargeResolution {
	pk := providerKey("charge", k)
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	c := s.promises()
	var amount int64
	var currency string
	if psp.LookUpBy(c) != psp.LookUpByKey {
		// A reference or a listing is matched by what the charge was for.
		view, err := s.orderView(ctx, k.OrderID.Int64)
		if err != nil {
			return ChargeResolution{Err: err, Unknown: true}
		}
		amount, currency = view.firstCharge(), view.Currency
	}
	ch, err := s.findOrderCharge(pctx, c, k, amount, currency)
	op := psp.OpLookupCharge
	var settle func(sqlx.QueryerContext) (Response, psp.Charge, error)
	switch {
	case err == nil:
		settle = func(db sqlx.QueryerContext) (Response, psp.Charge, error) {
			r, err := s.settleCharge(ctx, db, k, ch, pk)
			return r, ch, err
		}
	case psp.AnswerOf(psp.OpLookupCharge, err).Verdict == psp.VerdictNone:
		op = psp.OpCancelCharge
		settle, err = s.giveUpCharge(ctx, k, reason)
	}
	if settle != nil {
		return ChargeResolution{Settle: func(db sqlx.QueryerContext) (psp.Charge, error) {
			if db == nil {
				db = s.q
			}
			_, got, err := settle(db)
			return got, err
		}}
	}
	v := psp.AnswerOf(op, err).Verdict
	return ChargeResolution{Err: err, Unknown: v == psp.VerdictUnknown,
		LookupRefused: op == psp.OpLookupCharge && v == psp.VerdictAttention}
}

// RefundResolution is what the provider did with a key's refund, and how to record it.
type RefundResolution struct {
	RefundID, OrderID string // public ids
	Amount            int64
	// Settle finishes the refund in tx and completes the key, fenced by its lease token. Nil
	// when the provider could not tell: Err is then what it answered.
	Settle func(tx *sqlx.Tx) error
	// Refused: the provider refused the refund for good (Err); Settle fails it as the API
	// does (refusedRefund), and the key answers the refusal.
	Refused          bool
	ProviderRefundID string // the provider's refund, when it made one
	Err              error
	Unknown          bool // as ChargeResolution's
}

// ResolveRefund finishes k's refund at the provider, for the operator's release: looked up
// under its derived key, and made now if the provider has none (a refund needs no card, and
// the provider refunds once per key). The settlement runs on ctx.
func (s *Service) ResolveRefund(ctx context.Context, k *Key) (RefundResolution, error) {
	ref, err := loadRefund(ctx, s.db, k.RefundID.Int64)
	if err != nil {
		return RefundResolution{}, err
	}
	r := RefundResolution{RefundID: ref.PublicID, OrderID: ref.OrderPublicID, Amount: ref.Amount}
	unresolved := func(op string, err error) (RefundResolution, error) {
		r.Err, r.Unknown = err, psp.AnswerOf(op, err).Verdict == psp.VerdictUnknown
		return r, nil
	}
	pk := providerKey("refund", k)
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	pr, err := s.provider.LookupRefund(pctx, pk)
	op := psp.OpLookupRefund
	if psp.AnswerOf(psp.OpLookupRefund, err).Verdict == psp.VerdictNone {
		op = psp.OpRefund
		pr, err = s.provider.Refund(pctx, psp.RefundRequest{Key: pk, ChargeID: ref.ChargeID, Amount: ref.Amount, Reason: ref.Reason.String})
	}
	if a := psp.AnswerOf(op, err); a.Verdict == psp.VerdictRefused || a.Verdict == psp.VerdictLookUp {
		// A final refusal settles the key as the API's run would (refusedRefund).
		settle, lerr := s.refusedRefund(ctx, pctx, ref, a, err)
		if settle == nil {
			return unresolved(psp.OpLookupCharge, lerr)
		}
		r.Refused, r.Err = true, err
		r.Settle = func(tx *sqlx.Tx) error { _, err := settle(tx, k); return err }
		return r, nil
	}
	if err != nil {
		return unresolved(op, err)
	}
	resp, err := refundResponse(ref)
	if err != nil {
		return RefundResolution{}, err
	}
	r.ProviderRefundID = pr.ID
	r.Settle = func(tx *sqlx.Tx) error { return completeRefund(ctx, tx, k, resp, s.cfg.Now(), pr.ID) }
	return r, nil
}

// TakeOver gives the completer an abandoned key, under a new lease (Config.Lease) that
// fences its former worker out; nil if a retry or another completer took it first.
func (s *Service) TakeOver(ctx context.Context, k *Key, now time.Time) (*Key, error) {
	nk, err := keyed.TakeOver(ctx, s.q, k, now, s.cfg.Lease)
	if errors.Is(err, keyed.ErrNoKey) {
		return nil, nil
	}
	return nk, err
}

// ResumeRefund finishes the refund of a key the completer took over, as a retry would: a
// refund needs no card. Its problems are the API's.
func (s *Service) ResumeRefund(ctx context.Context, k *Key) error {
	_, err := (&refundOp{s: s}).Run(ctx, k, true)
	return err
}

// MarkAttention hands a key the completer holds to an operator, with its order's
// order.needs_attention event.
func (s *Service) MarkAttention(ctx context.Context, k *Key, reason string) error {
	return markAttention(ctx, s.q, k, reason)
}

// Compensations counts what one drive of the due compensations did.
type Compensations struct {
	Refunded int // charges found under given-up keys and refunded
	NoCharge int // given-up keys confirmed to hold no charge
	Retry    int // looked at again later
}

// CompensateDue drives up to batch due compensations (compensateDue), for the completer's
// pass.
func (s *Service) CompensateDue(ctx context.Context, batch int) (Compensations, error) {
	p, err := s.compensateDue(ctx, batch, s.cfg.Lease)
	return Compensations{Refunded: p.Refunded, NoCharge: p.NoCharge, Retry: p.Retry}, err
}
