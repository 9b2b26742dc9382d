package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
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
func (s *Service) ReleaseKey(ctx context.Context, clientID int64, key string, record Recorder) (ActionResult, error) {
	k, err := keyed.Get(ctx, s.db, clientID, key)
	if errors.Is(err, keyed.ErrNoKey) {
		return ActionResult{}, ErrKeyNotFound
	}
	if err != nil {
		return ActionResult{}, fmt.Errorf("release key: %w", err)
	}
	if k.State != StateNeedsAttention {
		return ActionResult{Outcome: OutcomeNotNeeded, State: k.State}, nil
	}
	if err := keyed.PublicIDs(ctx, s.db, k); err != nil { // for the record and a canceled order's answer
		return ActionResult{}, fmt.Errorf("release key: %w", err)
	}
	// Once the provider may have been asked to refund, the result must be written even if
	// the operator's browser gives up.
	ctx = context.WithoutCancel(ctx)
	detail := map[string]any{"key_id": k.ID, "attention_reason": k.AttentionReason.String}
	var settle func(tx *sqlx.Tx, k *Key) (string, error)
	if k.RefundID.Valid {
		settle, err = s.releaseRefund(ctx, k, detail)
	} else {
		settle, err = s.releaseOrder(ctx, k, detail)
	}
	if err != nil {
		return ActionResult{}, fmt.Errorf("release key: %w", err)
	}
	if settle == nil {
		return ActionResult{Outcome: detail["outcome"].(string), State: k.State, Detail: detail}, nil
	}

	var res ActionResult
	err = inTx(ctx, s.db, "release key", func(tx *sqlx.Tx) error {
		err := tx.GetContext(ctx, &k.LeaseToken, `
			UPDATE idempotency_keys
			   SET state = 'in_progress', attention_reason = NULL, lease_token = lease_token + 1,
			       lease_expires_at = NULL
			 WHERE id = $1 AND lease_token = $2 AND state = 'needs_attention'
			RETURNING lease_token`, k.ID, k.LeaseToken)
		if errors.Is(err, sql.ErrNoRows) {
			// Another release got there first; the key is settled or being settled.
			res = ActionResult{Outcome: OutcomeNotNeeded, State: StateCompleted}
			return nil
		}
		if err != nil {
			return fmt.Errorf("release key: take it from attention: %w", err)
		}
		k.State = StateInProgress
		outcome, err := settle(tx, k)
		if err != nil {
			return fmt.Errorf("release key: %w", err)
		}
		detail["outcome"] = outcome
		if err := record(ctx, tx, detail); err != nil {
			return fmt.Errorf("release key: record: %w", err)
		}
		res = ActionResult{Done: true, Outcome: outcome, State: StateCompleted, Detail: detail}
		return nil
	})
	if err != nil {
		return ActionResult{}, err
	}
	return res, nil
}

// releaseOrder asks the provider about the key's charge and returns how to settle the
// order, or nil when the provider cannot tell.
func (s *Service) releaseOrder(ctx context.Context, k *Key, detail map[string]any) (func(*sqlx.Tx, *Key) (string, error), error) {
	detail["order_id"] = k.OrderPublicID
	pk := providerKey("charge", k)
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	ch, err := s.provider.LookupCharge(pctx, pk)
	op := psp.OpLookupCharge
	var settle func(sqlx.QueryerContext) (Response, psp.Charge, error)
	switch {
	case err == nil:
		settle = func(db sqlx.QueryerContext) (Response, psp.Charge, error) {
			r, err := s.settleCharge(ctx, db, k, ch, pk)
			return r, ch, err
		}
	case psp.AnswerOf(psp.OpLookupCharge, err).Verdict == psp.VerdictNone:
		// As the completer: a charge may still be in flight, so fence the key first.
		op = psp.OpCancelCharge
		settle, err = s.giveUpCharge(ctx, k, "an operator released a key whose charge the provider did not hold")
	}
	if settle != nil {
		return func(tx *sqlx.Tx, k *Key) (string, error) {
			_, got, err := settle(tx)
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
		}, nil
	}
	providerSaid(detail, op, err)
	return nil, nil
}

// releaseRefund finishes the key's refund at the provider and returns how to record it, or
// nil when the provider cannot tell.
func (s *Service) releaseRefund(ctx context.Context, k *Key, detail map[string]any) (func(*sqlx.Tx, *Key) (string, error), error) {
	ref, err := loadRefund(ctx, s.db, k.RefundID.Int64)
	if err != nil {
		return nil, err
	}
	detail["refund_id"], detail["order_id"], detail["amount"] = ref.PublicID, ref.OrderPublicID, ref.Amount
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
			providerSaid(detail, psp.OpLookupCharge, lerr)
			return nil, nil
		}
		detail["provider_error"] = err.Error()
		return func(tx *sqlx.Tx, k *Key) (string, error) {
			if _, err := settle(tx, k); err != nil {
				return "", err
			}
			return OutcomeRefundRefused, nil
		}, nil
	}
	if err != nil {
		providerSaid(detail, op, err)
		return nil, nil
	}
	resp, err := refundResponse(ref)
	if err != nil {
		return nil, err
	}
	detail["provider_refund_id"] = pr.ID
	return func(tx *sqlx.Tx, k *Key) (string, error) {
		return OutcomeRefunded, completeRefund(ctx, tx, k, resp, s.cfg.Now(), pr.ID)
	}, nil
}

// providerSaid notes in detail why the provider's answer to op settles nothing: the outcome
// is still unknown, or the provider refused what tekrar derived.
func providerSaid(detail map[string]any, op string, err error) {
	detail["provider_error"] = err.Error()
	detail["outcome"] = OutcomeStillUnknown
	if psp.AnswerOf(op, err).Verdict != psp.VerdictUnknown {
		detail["outcome"] = OutcomeProviderRefused
	}
}
