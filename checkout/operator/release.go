package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/db"
)

// ReleaseKey resolves a key that needs attention, at an operator's request.
//
// A key needs attention when the completer could not learn from the provider, for longer
// than TEKRAR_ATTENTION_AFTER, whether the key's charge (or refund) happened. Nothing works
// on such a key any more: requests with it are answered 503 needs_attention, the completer
// and the sweeper leave it alone. Releasing it must not guess either, and must never charge:
// card tokens are not stored, and a charge made without looking could be a second one. So
// a release does what the completer would have done had the provider answered, asking about
// the key's providerKey, as every resume does:
//
//   - an order whose charge the provider has: the order is settled from that charge (paid or
//     declined), and the key stores the body a retry would have got;
//   - an order the provider has no charge for: the order is canceled and the key stores 409
//     payment_abandoned (nothing was charged; the customer may pay again with a new key);
//   - a refund: finished, made now if the provider has none under its derived key (a refund
//     needs no card, and the provider refunds once per key); a refund the provider refuses
//     for good is settled as the API settles it (refusedRefund: failed, and the refunds made
//     at the provider recorded), OutcomeRefundRefused;
//   - the provider still cannot answer: nothing changes and the key stays with the operator
//     (Done false, OutcomeStillUnknown, the provider's error in Detail); so too when the
//     provider refuses what tekrar derived (OutcomeProviderRefused: a derived key it holds
//     for other parameters), which a person has to look into.
//
// A key that does not need attention (already released, or never stuck) is left alone:
// Done false, OutcomeNotNeeded. Releasing twice is therefore harmless.
//
// The provider is asked outside any transaction: a network call never holds row locks.
// What it said is then written in one transaction: the key leaves needs_attention, fenced
// by the lease token read before the call (two operators releasing at once settle it once;
// the loser sees OutcomeNotNeeded), the settlement, fenced by the new token as every
// completion is, and the record.
func (a *Actions) ReleaseKey(ctx context.Context, clientID int64, key string, record Recorder) (ActionResult, error) {
	k, err := keyed.Get(ctx, a.db, clientID, key)
	if errors.Is(err, keyed.ErrNoKey) {
		return ActionResult{}, checkout.ErrKeyNotFound
	}
	if err != nil {
		return ActionResult{}, fmt.Errorf("release key: %w", err)
	}
	if k.State != checkout.StateNeedsAttention {
		return ActionResult{Outcome: OutcomeNotNeeded, State: k.State}, nil
	}
	if err := keyed.PublicIDs(ctx, a.db, k); err != nil { // for the record and a canceled order's answer
		return ActionResult{}, fmt.Errorf("release key: %w", err)
	}
	// Once the provider may have been asked to refund, the result must be written even if
	// the operator's browser gives up.
	ctx = context.WithoutCancel(ctx)
	detail := map[string]any{"key_id": k.ID, "attention_reason": k.AttentionReason.String}
	var settle func(tx *sqlx.Tx) (string, error)
	if k.RefundID.Valid {
		settle, err = a.releaseRefund(ctx, k, detail)
	} else {
		settle = a.releaseOrder(ctx, k, detail)
	}
	if err != nil {
		return ActionResult{}, fmt.Errorf("release key: %w", err)
	}
	if settle == nil {
		return ActionResult{Outcome: detail["outcome"].(string), State: k.State, Detail: detail}, nil
	}

	var res ActionResult
	err = db.InTx(ctx, a.db, "release key", func(tx *sqlx.Tx) error {
		taken, err := keyed.TakeFromAttention(ctx, tx, k)
		if err != nil {
			return fmt.Errorf("release key: take it from attention: %w", err)
		}
		if !taken {
			// Another release got there first; the key is settled or being settled.
			res = ActionResult{Outcome: OutcomeNotNeeded, State: checkout.StateCompleted}
			return nil
		}
		outcome, err := settle(tx)
		if err != nil {
			return fmt.Errorf("release key: %w", err)
		}
		detail["outcome"] = outcome
		if err := record(ctx, tx, detail); err != nil {
			return fmt.Errorf("release key: record: %w", err)
		}
		res = ActionResult{Done: true, Outcome: outcome, State: checkout.StateCompleted, Detail: detail}
		return nil
	})
	if err != nil {
		return ActionResult{}, err
	}
	return res, nil
}

// releaseOrder asks the provider about the key's charge and returns how to settle the
// order, or nil when the provider cannot tell.
func (a *Actions) releaseOrder(ctx context.Context, k *checkout.Key, detail map[string]any) func(*sqlx.Tx) (string, error) {
	detail["order_id"] = k.OrderPublicID
	// As the completer: a charge may still be in flight, so ResolveCharge fences the key
	// first when the provider has none yet.
	r := a.s.ResolveCharge(ctx, k, "an operator released a key whose charge the provider did not hold")
	if r.Settle == nil {
		providerSaid(detail, r.Err, r.Unknown)
		return nil
	}
	return func(tx *sqlx.Tx) (string, error) {
		got, err := r.Settle(tx)
		if err != nil {
			return "", err
		}
		detail["charge_status"] = got.Status
		if got.ID != "" {
			detail["charge_id"] = got.ID
		}
		switch got.Status {
		case psp.StatusSucceeded:
			return OutcomePaid, nil
		case psp.StatusDeclined:
			return OutcomeDeclined, nil
		}
		return OutcomeCanceled, nil
	}
}

// releaseRefund finishes the key's refund at the provider and returns how to record it, or
// nil when the provider cannot tell.
func (a *Actions) releaseRefund(ctx context.Context, k *checkout.Key, detail map[string]any) (func(*sqlx.Tx) (string, error), error) {
	r, err := a.s.ResolveRefund(ctx, k)
	if err != nil {
		return nil, err
	}
	detail["refund_id"], detail["order_id"], detail["amount"] = r.RefundID, r.OrderID, r.Amount
	switch {
	case r.Settle == nil:
		providerSaid(detail, r.Err, r.Unknown)
		return nil, nil
	case r.Refused:
		// A final refusal settles the key as the API's run would.
		detail["provider_error"] = r.Err.Error()
		return func(tx *sqlx.Tx) (string, error) {
			return OutcomeRefundRefused, r.Settle(tx)
		}, nil
	}
	detail["provider_refund_id"] = r.ProviderRefundID
	return func(tx *sqlx.Tx) (string, error) {
		return OutcomeRefunded, r.Settle(tx)
	}, nil
}

// providerSaid notes in detail why the provider's answer err settles nothing: the outcome
// is still unknown, or the provider refused what tekrar derived.
func providerSaid(detail map[string]any, err error, unknown bool) {
	detail["provider_error"] = err.Error()
	detail["outcome"] = OutcomeStillUnknown
	if !unknown {
		detail["outcome"] = OutcomeProviderRefused
	}
}
