package checkout

import (
	"context"
	"fmt"
	"time"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
)

// Finding a charge whose answer was lost, the way the provider can.
//
// Every path that must know whether a charge was made (a resumed order, the completer and
// the operator's release, a compensation, a refused refund, an installment run,
// reconciliation) asks through FindCharge, which asks as the provider's row says
// (psp.LookUpBy): by the derived key where the provider keeps keys, by the reference that
// names the order where it keeps none (iyzico's conversationId; tekrar's reference is the
// charge's description, which names the order by its public id), or by listing a window of
// charges and matching the description. A provider without keys may hold several charges of
// one order (a request sent twice before tekrar learnt not to): FindCharge settles on the
// first that succeeded and names the others, which are owed back.

// ChargeRef is what tekrar sent a charge with: enough to find it by any of the provider's
// ways.
type ChargeRef struct {
	Key       string // the provider key it was sent under
	Reference string // its description: chargeDescription or InstallmentDescription
	Amount    int64  // what it was for; 0 matches any amount
	Currency  string // "" matches any currency
	// ChargeID, when tekrar recorded the charge already (a payment's, a compensation's), is
	// the one charge meant: found by reference or listing, no other matches, whatever its
	// amount.
	ChargeID string
	// Since is the earliest the charge can have been made (the key's creation), the start
	// of a listing's window.
	Since time.Time
}

// OrderReference is the reference of an order's own charge (its description), for a role
// that finds the charge of an order it reads (reconciliation).
func OrderReference(publicID string) string { return chargeDescription(publicID) }

// FoundCharge is what FindCharge found.
type FoundCharge struct {
	psp.Charge
	// Others are further succeeded charges of the same reference, oldest first: a provider
	// without keys charged the order more than once. Each is owed back.
	Others []psp.Charge
}

// listingMargin widens a listing's window on both sides: the provider stamps a charge by
// its own clock.
const listingMargin = 10 * time.Minute

// FindCharge finds the charge of ref at p as p's row c says, by now. None found is an error
// that psp.NoChargeYet recognises (psp.ErrNotFound), whichever way it was asked; a provider
// that offers no way answers psp.ErrLookupUnsupported, whose outcome is unknown.
func FindCharge(ctx context.Context, p psp.Provider, c psp.Capability, ref ChargeRef, now time.Time) (FoundCharge, error) {
	way := psp.LookUpBy(c)
	if way == psp.LookUpByReference && ref.Reference == "" && c.FindByListing == psp.SupportYes {
		way = psp.LookUpByListing // a charge of no order has no reference: only its id names it
	}
	switch way {
	case psp.LookUpByKey:
		ch, err := p.LookupCharge(ctx, ref.Key)
		return FoundCharge{Charge: ch}, err
	case psp.LookUpByReference:
		charges, err := psp.ChargesByReference(ctx, p, ref.Reference)
		if err != nil {
			return FoundCharge{}, err
		}
		return ref.pick(charges)
	case psp.LookUpByListing:
		var matched []psp.Charge
		q := psp.ChargeListQuery{Since: ref.Since.Add(-listingMargin), Until: now.Add(listingMargin)}
		for {
			page, err := p.ListCharges(ctx, q)
			if err != nil {
				return FoundCharge{}, err
			}
			for _, ch := range page.Charges {
				if (ref.ChargeID != "" && ch.ID == ref.ChargeID) || (ref.ChargeID == "" && ch.Description == ref.Reference) {
					matched = append(matched, ch)
				}
			}
			if page.Next == "" {
				return ref.pick(matched)
			}
			q.After = page.Next
		}
	}
	return FoundCharge{}, fmt.Errorf("%w: the provider offers no way to find a charge", psp.ErrLookupUnsupported)
}

// pick is the charge of ref among charges of its reference, oldest first: the one tekrar
// recorded, else the first that succeeded (with the others that did), else the latest.
func (ref ChargeRef) pick(charges []psp.Charge) (FoundCharge, error) {
	var found FoundCharge
	var last *psp.Charge
	for i, ch := range charges {
		switch {
		case ref.ChargeID != "":
			if ch.ID != ref.ChargeID {
				continue
			}
		case ref.Amount != 0 && ch.Status != psp.StatusCanceled && ch.Amount != ref.Amount:
			continue
		case ref.Currency != "" && ch.Status != psp.StatusCanceled && ch.Currency != ref.Currency:
			continue
		}
		switch {
		case ch.Status != psp.StatusSucceeded:
			last = &charges[i]
		case found.ID == "":
			found.Charge = ch
		default:
			found.Others = append(found.Others, ch)
		}
	}
	switch {
	case found.ID != "":
		return found, nil
	case last != nil:
		return FoundCharge{Charge: *last}, nil
	}
	return FoundCharge{}, fmt.Errorf("%w: no charge has reference %q", psp.ErrNotFound, ref.Reference)
}

// promises is what the service's provider promises (psp.PromisesOf), asked at each
// decision: a provider reached over HTTP says it once it can.
func (s *Service) promises() psp.Capability { return psp.PromisesOf(s.provider) }

// findOrderCharge finds the charge of k's order (amount and currency of its first charge)
// as the provider promises, and flags a provider that charged it more than once: those
// charges are owed back.
func (s *Service) findOrderCharge(ctx context.Context, c psp.Capability, k *Key, amount int64, currency string) (psp.Charge, error) {
	if psp.LookUpBy(c) != psp.LookUpByKey {
		if err := keyed.PublicIDs(ctx, s.q, k); err != nil { // no query when the key was read with them
			return psp.Charge{}, err
		}
	}
	found, err := FindCharge(ctx, s.provider, c, ChargeRef{
		Key: providerKey("charge", k), Reference: chargeDescription(k.OrderPublicID),
		Amount: amount, Currency: currency, Since: k.CreatedAt,
	}, s.cfg.Now())
	if err != nil {
		return psp.Charge{}, err
	}
	s.flagOthers(k.OrderID.Int64, found)
	return found.Charge, nil
}

// flagOthers reports charges of one order beyond the first that succeeded. Reconciliation
// owes them back (a succeeded charge under a payment's key that is not the payment's is an
// orphan of the order); here they are named in the log (docs/recovery.md).
func (s *Service) flagOthers(orderID int64, found FoundCharge) {
	for _, o := range found.Others {
		s.logger.Error("the provider charged an order more than once: the later charge is owed back",
			"order_id", orderID, "settled_with", found.ID, "charge_id", o.ID, "amount", o.Amount, "currency", o.Currency)
	}
}

// firstCharge is what the order's own charge took: its amount, or its first installment.
func (v OrderView) firstCharge() int64 {
	if v.plan > 1 {
		return splitAmount(v.Amount, v.plan)[0]
	}
	return v.Amount
}

// findCompensatedCharge finds the charge a compensation watches for: under its charge key,
// or, at a provider that finds charges otherwise, by its order's reference (or, for a
// charge of no order, by its id in a listing of the horizon before the compensation).
func (s *Service) findCompensatedCharge(ctx context.Context, c compensation, now time.Time) (psp.Charge, error) {
	pc := s.promises()
	if psp.LookUpBy(pc) == psp.LookUpByKey {
		ch, err := s.provider.LookupCharge(ctx, c.ChargeKey)
		if err == nil && c.ChargeID.Valid && ch.ID != c.ChargeID.String && ch.Status != psp.StatusCanceled {
			// Past a key window the key holds a newer charge than the one this debt names:
			// never refund another charge than the one owed.
			return psp.Charge{}, fmt.Errorf("the charge under key %s is %s, not %s, which is owed", c.ChargeKey, ch.ID, c.ChargeID.String)
		}
		return ch, err
	}
	ref := ChargeRef{Key: c.ChargeKey, ChargeID: c.ChargeID.String, Since: c.CreatedAt.Add(-s.cfg.ProviderHorizon)}
	if c.OrderID.Valid {
		view, err := s.orderView(ctx, c.OrderID.Int64)
		if err != nil {
			return psp.Charge{}, err
		}
		ref.Reference, ref.Amount, ref.Currency = chargeDescription(view.ID), view.firstCharge(), view.Currency
	}
	found, err := FindCharge(ctx, s.provider, pc, ref, now)
	if err != nil {
		return psp.Charge{}, err
	}
	s.flagOthers(c.OrderID.Int64, found)
	return found.Charge, nil
}
