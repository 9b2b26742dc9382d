package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// A refund the provider refuses for good.
//
// The provider's refusal of a refund is final (psp.OpRefund's table): nothing was refunded, and
// nothing will be under the refund's key. Waiting on it would keep the key in progress and
// the refund pending for ever, with the client told 503 payment_pending on every retry. So
// the key is completed with the refusal as its stored answer, which retries replay; the
// refund is failed and its amount freed on the order.
//
// A refusal that says the charge is refunded already (refund_exceeds_charge) means someone
// refunded it at the provider, outside tekrar, typically at its dashboard, and its webhook
// has not arrived yet. tekrar then reads the charge at the provider and records those refunds
// on the order as their webhook would (providerRefundsSQL, the same statement, by totals), so
// the webhook arriving later finds them counted and records nothing twice. The client is
// answered 409 refunded_at_provider with what the order holds now.

// refundSettle settles a refund's key inside tx: what refusedRefund returns.
type refundSettle func(tx *sqlx.Tx, k *Key) (Response, error)

// refusedRefund returns how to settle the refund ref that the provider refused with perr (a
// of the table). For a look-up refusal it reads the charge first, on pctx (bounded by the
// provider timeout); when that cannot be done it returns nil and why: the outcome is then
// left unknown and asked again. The settlement runs on ctx.
func (s *Service) refusedRefund(ctx, pctx context.Context, ref refund, a psp.Answer, perr error) (refundSettle, error) {
	var ch *psp.Charge
	if a.Verdict == psp.VerdictLookUp {
		var pay struct {
			ChargeKey string    `db:"provider_key"`
			Ordered   time.Time `db:"created_at"`
		}
		if err := sqlx.GetContext(ctx, s.db, &pay, `
			SELECT p.provider_key, o.created_at FROM payments p JOIN orders o ON o.id = p.order_id
			 WHERE p.order_id = $1`, ref.OrderID); err != nil {
			return nil, fmt.Errorf("refused refund: the order's payment: %w", err)
		}
		// The payment names its charge: found under its key, or by the order's reference,
		// or in a listing since the order, as the provider can.
		found, err := FindCharge(pctx, s.provider, s.promises(), ChargeRef{Key: pay.ChargeKey,
			Reference: chargeDescription(ref.OrderPublicID), ChargeID: ref.ChargeID, Since: pay.Ordered}, s.cfg.Now())
		got := found.Charge
		if psp.AnswerOf(psp.OpLookupCharge, err).Verdict != psp.VerdictDone {
			return nil, fmt.Errorf("refused refund (%v): look up charge: %w", perr, err)
		}
		if got.ID != ref.ChargeID {
			return nil, fmt.Errorf("refused refund (%v): the charge under the payment's key is %s, not %s", perr, got.ID, ref.ChargeID)
		}
		if got.Refunded+ref.Amount <= got.Amount {
			// The charge has room for this refund now: the refusal is not the provider's
			// last word (it changed since, or contradicts its record). Ask again later.
			return nil, fmt.Errorf("refused refund (%v): the provider's charge %s has %d of %d refunded, room for %d",
				perr, got.ID, got.Refunded, got.Amount, ref.Amount)
		}
		ch = &got
	}
	s.logger.Warn("the provider refused a refund for good", "refund_id", ref.ID, "order_id", ref.OrderID, "err", perr)
	return func(tx *sqlx.Tx, k *Key) (Response, error) {
		now := s.cfg.Now()
		var keyRefund sql.NullInt64
		err := tx.GetContext(ctx, &keyRefund, lockRefundKeySQL, k.ID, k.LeaseToken)
		if errors.Is(err, sql.ErrNoRows) {
			return Response{}, keyed.ErrFenced
		}
		if err != nil {
			return Response{}, fmt.Errorf("refused refund: lock key: %w", err)
		}
		var orderID int64
		if err := tx.GetContext(ctx, &orderID, failRefundSQL, ref.ID, now); err != nil {
			return Response{}, fmt.Errorf("refused refund: fail refund %d: %w", ref.ID, err)
		}
		if ch != nil && ch.Refunded > 0 {
			if _, err := tx.ExecContext(ctx, providerRefundsSQL, orderID, ch.Refunded,
				"provider:"+ch.ID+":refused-key:"+strconv.FormatInt(k.ID, 10), now, nil, nil); err != nil {
				return Response{}, fmt.Errorf("refused refund: record the provider's refunds: %w", err)
			}
		}
		p, err := refusalProblem(ctx, tx, ref, a, perr)
		if err != nil {
			return Response{}, err
		}
		resp := Response{Status: p.Status, Body: p.Body(k.Path), Header: map[string]string{"Content-Type": problem.ContentType}}
		kc, err := keyed.Complete(k, resp, now)
		if err != nil {
			return Response{}, err
		}
		res, err := completeKeySQL.exec(ctx, tx, kc)
		if err != nil {
			return Response{}, fmt.Errorf("refused refund: complete key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return Response{}, keyed.ErrFenced
		}
		return resp, nil
	}, nil
}

// refusalProblem is the stored answer of a refused refund, with the order as it is now.
func refusalProblem(ctx context.Context, tx *sqlx.Tx, ref refund, a psp.Answer, perr error) (*problem.Problem, error) {
	var o struct {
		Status   string `db:"status"`
		Captured int64  `db:"captured_amount"`
		Refunded int64  `db:"refunded_amount"`
	}
	if err := tx.GetContext(ctx, &o, `SELECT status, captured_amount, refunded_amount FROM orders WHERE id = $1`, ref.OrderID); err != nil {
		return nil, fmt.Errorf("refused refund: read order: %w", err)
	}
	p := problem.Of(a.Problem).With("order_id", ref.OrderPublicID).With("refund_id", ref.PublicID)
	if a.Problem == problem.CodeRefundedAtProvider {
		p = p.WithDetail(fmt.Sprintf("the payment provider had already refunded this charge outside tekrar and refused this refund of %d; "+
			"those refunds are now recorded on the order, which is %s with %d of %d refunded. Nothing more was refunded",
			ref.Amount, o.Status, o.Refunded, o.Captured)).
			With("refunded_amount", o.Refunded).With("refundable", max(o.Captured-o.Refunded, 0))
	} else {
		p = p.WithDetail("the payment provider refused this refund for good; nothing was refunded, and the refund's amount is freed on the order").
			With("provider_code", providerCode(perr))
	}
	return p.Advised(), nil
}

// providerCode is the provider's code of a definitive error, as its API names it.
func providerCode(err error) string {
	if c := psp.ErrorCode(err); c != "" {
		return c
	}
	return "unknown"
}
