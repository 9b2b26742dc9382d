package checkout

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// Giving up on a charge.
//
// A worker that stalls past its lease (SIGSTOP, a GC pause, a VM migration) may still have
// its charge in flight at the provider. When the completer (or an operator's release) finds
// no charge under the key, that only means "none yet". So tekrar gives up on a charge in
// one of two ways, and never by a look-up alone:
//
//   - fenced: the provider cancels the charge key (psp.Provider.CancelCharge), so a request
//     still in flight under it is refused. Only then is the order canceled with the answer
//     "nothing was charged".
//   - owed: the provider cannot fence. The order is canceled and, in the same statement, a
//     compensation is written: a refund tekrar owes if a charge still appears under the key.
//     Every serve process drives due compensations (compensateDue) until the refund is
//     made or the provider's processing horizon has passed with no charge. The stored answer
//     says so instead of claiming that nothing was charged.
//
// A worker that wakes to find its order canceled while its charge succeeded writes (or
// reopens) the compensation itself, so the refund is owed in Postgres, never only in the
// memory of a process that may die.

// canceledAnswer is the stored answer of an order canceled because its worker was gone
// before the card was charged. With owed false the provider confirmed that nothing was or
// will be charged under the key; with owed true it could not, and any charge that still
// appears is refunded automatically.
func canceledAnswer(orderID string, owed bool) *problem.Problem {
	detail := "the request was interrupted before the card was charged and was not retried in time; nothing was charged and the order is canceled. Pay again with a new key"
	if owed {
		detail = "the request was interrupted before the card was charged and was not retried in time; the order is canceled. If the payment provider still completes the interrupted charge, it is refunded in full automatically. Pay again with a new key"
	}
	return problem.Of(problem.CodePaymentAbandoned).
		WithDetail(detail).
		With("order_id", orderID).Advised()
}

// owedRefund is the compensation written with an order canceled without a provider fence.
type owedRefund struct {
	chargeKey  string
	reason     string
	watchUntil time.Time
}

// owe returns the compensation for giving up on k's charge at now without a fence.
func (s *Service) owe(k *Key, now time.Time, reason string) *owedRefund {
	return &owedRefund{chargeKey: providerKey("charge", k), reason: reason, watchUntil: now.Add(s.cfg.ProviderHorizon)}
}

// orderCancel is the parameters of cancelOrderSQL; the compensation's fields are NULL
// when none is owed.
type orderCancel struct {
	keyed.SetState
	ClientID   int64          `db:"client_id"`
	ChargeKey  sql.NullString `db:"charge_key"`
	Reason     sql.NullString `db:"reason"`
	WatchUntil sql.NullTime   `db:"watch_until"`
}

// cancelOrderSQL: see cancelOrder. Each later step reads the key's order_id from k, so it
// does nothing when the fence matched no row.
var cancelOrderSQL = named[orderCancel](`
	WITH k AS (` + keyed.SetStateSQL + `
	    RETURNING order_id
	), o AS (
	    UPDATE orders SET status = 'canceled', updated_at = :now WHERE id = (SELECT order_id FROM k)
	    RETURNING id, client_id, public_id, status, amount, currency
	), i AS (
	    -- A plan whose first installment was never charged is canceled with its order; none
	    -- of its installments can be in flight, as only a paid order's are charged.
	    UPDATE installments SET status = 'canceled', next_attempt_at = NULL, lease_expires_at = NULL, updated_at = :now
	     WHERE order_id = (SELECT order_id FROM k) AND status IN ('scheduled', 'attention')
	), c AS (
	    INSERT INTO compensations (client_id, order_id, charge_key, reason, next_attempt_at, watch_until, created_at)
	    SELECT :client_id, k.order_id, CAST(:charge_key AS text), CAST(:reason AS text), :now,
	           CAST(:watch_until AS timestamptz), :now
	      FROM k WHERE CAST(:charge_key AS text) IS NOT NULL
	    ON CONFLICT (order_id) DO NOTHING
	    RETURNING order_id, reason
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.CompensationCreated) + `, o.id, ` + compensationPayloadSQL + `, :now
	      FROM c JOIN o ON o.id = c.order_id
	), e AS (` + outbox.InsertSQL + `
	), ` + releaseStockSQL + `
	SELECT count(*) FROM k`)

// compensationPayloadSQL is compensation.created's data, from the order o and the
// compensation c: docs/outbox.md.
const compensationPayloadSQL = orderPayloadSQL + ` || jsonb_build_object('reason', c.reason)`

// CompensationPayloadSQL is compensationPayloadSQL for a statement outside the package that
// owes a compensation and writes its compensation.created event (reconciliation's).
const CompensationPayloadSQL = compensationPayloadSQL

// cancelOrder settles an order that was never charged: canceled, with the canceled answer
// stored on its key, fenced by the lease token; with owe set, the compensation is written
// by the same statement, so the order is never canceled without the refund it owes, and
// the order gives back the stock it took in it (releaseStockSQL).
func cancelOrder(ctx context.Context, db sqlx.QueryerContext, k *Key, now time.Time, owe *owedRefund) (Response, error) {
	if err := keyed.PublicIDs(ctx, db, k); err != nil { // no query when the key was read with them
		return Response{}, err
	}
	p := canceledAnswer(k.OrderPublicID, owe != nil)
	resp := Response{Status: p.Status, Body: p.Body(k.Path), Header: map[string]string{"Content-Type": problem.ContentType}}
	completion, err := keyed.Complete(k, resp, now)
	if err != nil {
		return Response{}, err
	}
	params := orderCancel{
		SetState: completion,
		ClientID: k.ClientID,
	}
	if owe != nil {
		params.ChargeKey, params.Reason = nullString(owe.chargeKey), nullString(owe.reason)
		params.WatchUntil = sql.NullTime{Time: owe.watchUntil, Valid: true}
	}
	var n int
	if err := retryDeadlock(db, func() error { return cancelOrderSQL.get(ctx, db, &n, params) }); err != nil {
		return Response{}, fmt.Errorf("cancel order: %w", err)
	}
	if n == 0 {
		return Response{}, keyed.ErrFenced
	}
	return resp, nil
}

// settleCharge stores what the provider holds under k's charge key: a canceled key cancels
// the order (nothing was charged), a charge settles it paid or declined.
func (s *Service) settleCharge(ctx context.Context, db sqlx.QueryerContext, k *Key, ch psp.Charge, pk string) (Response, error) {
	if ch.Status == psp.StatusCanceled {
		return cancelOrder(ctx, db, k, s.cfg.Now(), nil)
	}
	view, err := s.orderView(ctx, k.OrderID.Int64)
	if err != nil {
		return Response{}, err
	}
	return s.settleOrder(ctx, db, k, view, ch, pk)
}

// giveUpCharge asks the provider to fence k's charge key after a look-up found no charge.
// It returns how to settle the order: from the charge the provider holds (a canceled key,
// or a charge that got there first), or, when the provider cannot fence, canceled with a
// refund owed. It returns nil when the provider could not answer; err is what it said.
func (s *Service) giveUpCharge(ctx context.Context, k *Key, reason string) (func(db sqlx.QueryerContext) (Response, psp.Charge, error), error) {
	pk := providerKey("charge", k)
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	ch, err := s.provider.CancelCharge(pctx, pk)
	switch {
	case err == nil:
		return func(db sqlx.QueryerContext) (Response, psp.Charge, error) {
			r, err := s.settleCharge(ctx, db, k, ch, pk)
			return r, ch, err
		}, nil
	case psp.AnswerOf(psp.OpCancelCharge, err).Verdict == psp.VerdictRefused: // cancel_unsupported
		return func(db sqlx.QueryerContext) (Response, psp.Charge, error) {
			now := s.cfg.Now()
			r, err := cancelOrder(ctx, db, k, now, s.owe(k, now, reason))
			return r, psp.Charge{Status: psp.StatusCanceled}, err
		}, nil
	}
	return nil, err
}

// owedCharge is the parameters of oweRefundSQL.
type owedCharge struct {
	OrderID    int64     `db:"order_id"`
	ChargeKey  string    `db:"charge_key"`
	Reason     string    `db:"reason"`
	ChargeID   string    `db:"charge_id"`
	Now        time.Time `db:"now"`
	WatchUntil time.Time `db:"watch_until"`
}

// oweRefundSQL writes the refund owed for a charge of a canceled order: see
// oweRefundIfCanceled.
//
// compensation.created is written only when the compensation is new (xmax = 0: inserted,
// not updated); naming the charge on an existing one is no new event.
var oweRefundSQL = named[owedCharge](`
	WITH c AS (
	    INSERT INTO compensations (client_id, order_id, charge_key, reason, charge_id, next_attempt_at, watch_until, created_at)
	    SELECT o.client_id, o.id, :charge_key, :reason, :charge_id, :now, :watch_until, :now
	      FROM orders o WHERE o.id = :order_id AND o.status = 'canceled'
	    ON CONFLICT (order_id) DO UPDATE
	       SET state = CASE WHEN compensations.state = 'disputed' THEN 'disputed' ELSE 'watching' END,
	           settled_at = NULL, charge_id = excluded.charge_id,
	           next_attempt_at = least(compensations.next_attempt_at, excluded.next_attempt_at),
	           watch_until = greatest(compensations.watch_until, excluded.watch_until)
	     WHERE compensations.state NOT IN ('refunded', 'already_refunded', 'dispute_lost')
	    RETURNING order_id, reason, xmax = 0 AS inserted
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.CompensationCreated) + `, o.id, ` + compensationPayloadSQL + `, :now
	      FROM c JOIN orders o ON o.id = c.order_id
	     WHERE c.inserted
	), e AS (` + outbox.InsertSQL + `
	)
	SELECT count(*) FROM c`)

// oweRefundIfCanceled is called by a worker whose completion was fenced after its charge
// succeeded: if the order was canceled meanwhile (a provider that cannot fence), the charge
// must be refunded. It writes that debt (or names the charge on the compensation written
// with the cancel, makes it due now, and reopens it if it had stopped watching), and leaves
// the refund to compensateDue.
func (s *Service) oweRefundIfCanceled(ctx context.Context, k *Key, ch psp.Charge) {
	if ch.Status != psp.StatusSucceeded {
		return
	}
	now := s.cfg.Now()
	var n int
	err := oweRefundSQL.get(ctx, s.q, &n, owedCharge{OrderID: k.OrderID.Int64, ChargeKey: providerKey("charge", k),
		Reason: "charge succeeded after its order was canceled", ChargeID: ch.ID,
		Now: now, WatchUntil: now.Add(s.cfg.ProviderHorizon)})
	if err != nil {
		// The compensation written with the cancel still watches the key until its horizon.
		s.logger.Error("compensate: record the refund owed for a charge whose order was canceled",
			"order_id", k.OrderID.Int64, "charge_id", ch.ID, "err", err)
		return
	}
	if n > 0 {
		s.logger.Warn("a charge succeeded after its order was canceled: refund owed",
			"order_id", k.OrderID.Int64, "charge_id", ch.ID)
	}
}

// Compensation states.
const (
	CompensationWatching = "watching"  // a charge may still appear under the key; not settled
	CompensationRefunded = "refunded"  // a charge appeared and what the provider had not refunded of it was refunded
	CompensationNoCharge = "no_charge" // the provider's horizon passed with no charge, or it was declined or canceled
	// CompensationAlreadyRefunded: a charge appeared, but the provider had already refunded
	// all of it by other refunds (an operator's at its dashboard); nothing was owed.
	CompensationAlreadyRefunded = "already_refunded"
	// CompensationDisputed: the charge's cardholder disputes it and the dispute is open. The
	// refund is held, as a disputed order's is: refunding now could pay the cardholder twice,
	// if the bank decides the dispute for them. Not settled; looked at again on its
	// schedule until the provider says the dispute is decided.
	CompensationDisputed = "disputed"
	// CompensationDisputeLost: the dispute was decided for the cardholder, whose bank gave
	// them the disputed amount back, and nothing of the charge remained to refund beyond it.
	CompensationDisputeLost = "dispute_lost"
)

// compensationOpenSQL are the states of a compensation not settled yet, for "state IN ".
const compensationOpenSQL = `('watching', 'disputed')`

// Who wrote a compensation.
const (
	CompensationByCancel    = "cancel"    // an order canceled without a provider fence
	CompensationByReconcile = "reconcile" // reconciliation found a charge of no completable order
)

// compensationPass counts what one pass of compensateDue did.
type compensationPass struct {
	Refunded        int // charges found under given-up keys and refunded
	AlreadyRefunded int // charges found that the provider had already refunded in full
	NoCharge        int // keys confirmed to hold no charge
	Retry           int // looked at again later: no charge yet within the horizon, or the provider could not answer
	Held            int // charges whose dispute is open: held, looked at again later
	DisputeLost     int // charges whose dispute the cardholder won, with nothing left to refund
}

// compensation is a row of compensations as the worker needs it.
type compensation struct {
	ID         int64         `db:"id"`
	OrderID    sql.NullInt64 `db:"order_id"` // NULL: a charge reconciliation found with no order
	ChargeKey  string        `db:"charge_key"`
	Source     string        `db:"source"` // cancel or reconcile
	Attempts   int           `db:"attempts"`
	WatchUntil time.Time     `db:"watch_until"`
	// ChargeID is the charge it names, once one is known (a worker that woke to a canceled
	// order, reconciliation); CreatedAt when it was owed. A provider that finds no charge
	// by key finds it by them.
	ChargeID  sql.NullString `db:"charge_id"`
	CreatedAt time.Time      `db:"created_at"`
}

// compensationRefundKey is the provider key of the refund a compensation makes: derived
// from the charge key alone, so that every worker, however many race or restart, asks the
// provider for the same refund, which it makes once.
func compensationRefundKey(chargeKey string) string {
	h := sha256.Sum256([]byte("compensate\x00" + chargeKey))
	return "tekrar_co_" + hex.EncodeToString(h[:16])
}

// compensateDue works on up to batch due compensations. Each is taken by moving its
// next attempt past hold, so that a worker that stalls or dies gives it back by itself; a
// second worker that takes it after that asks for the same refund key, so the refund is made
// once whatever happens.
func (s *Service) compensateDue(ctx context.Context, batch int, hold time.Duration) (compensationPass, error) {
	now := s.cfg.Now()
	var due []compensation
	err := sqlx.SelectContext(ctx, s.db, &due, `
		UPDATE compensations SET next_attempt_at = $2, attempts = attempts + 1
		 WHERE id IN (SELECT id FROM compensations
		               WHERE state IN `+compensationOpenSQL+` AND next_attempt_at <= $1
		               ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING id, order_id, charge_key, source, attempts, watch_until, charge_id, created_at`,
		now, now.Add(hold), batch)
	if err != nil {
		return compensationPass{}, fmt.Errorf("compensations: take due: %w", err)
	}
	var res compensationPass
	var errs []error
	for _, c := range due {
		if err := s.driveCompensation(ctx, c, now, &res); err != nil {
			errs = append(errs, fmt.Errorf("compensation %d: %w", c.ID, err))
		}
	}
	return res, errors.Join(errs...)
}

// DriveCompensations makes the refunds of the compensations ids now, those of them that
// are due, each taken as compensateDue takes one: so that a run of reconciliation by hand
// finishes what it met, while a concurrent run and every completer may try the same debt
// and the provider still refunds once. It answers how many it refunded.
func (s *Service) DriveCompensations(ctx context.Context, ids []int64) (refunded int, err error) {
	if len(ids) == 0 {
		return 0, nil
	}
	now := s.cfg.Now()
	var due []compensation
	if err := sqlx.SelectContext(ctx, s.db, &due, takeCompensationsSQL, now, now.Add(s.cfg.Lease), pq.Array(ids)); err != nil {
		return 0, fmt.Errorf("take the compensations met: %w", err)
	}
	var pass compensationPass
	var errs []error
	for _, c := range due {
		if err := s.driveCompensation(ctx, c, now, &pass); err != nil {
			errs = append(errs, fmt.Errorf("compensation %d: %w", c.ID, err))
		}
	}
	return pass.Refunded, errors.Join(errs...)
}

// takeCompensationsSQL takes the due compensations among $3 (ids) as compensateDue takes
// any: by moving their next attempt past the hold ($2).
const takeCompensationsSQL = `
	UPDATE compensations SET next_attempt_at = $2, attempts = attempts + 1
	 WHERE id IN (SELECT id FROM compensations
	               WHERE id = ANY ($3) AND state IN ` + compensationOpenSQL + ` AND next_attempt_at <= $1
	               FOR UPDATE SKIP LOCKED)
	RETURNING id, order_id, charge_key, source, attempts, watch_until, charge_id, created_at`

func (s *Service) driveCompensation(ctx context.Context, c compensation, now time.Time, res *compensationPass) error {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	ch, err := s.findCompensatedCharge(pctx, c, now)
	lookup := psp.AnswerOf(psp.OpLookupCharge, err).Verdict
	switch {
	case lookup == psp.VerdictNone && !now.Before(c.WatchUntil):
		res.NoCharge++
		return s.settleCompensation(ctx, c, CompensationNoCharge, psp.Charge{}, psp.Refund{})
	case lookup == psp.VerdictNone:
		res.Retry++
		return s.retryCompensation(ctx, c, now, "")
	case err != nil:
		res.Retry++
		return s.retryCompensation(ctx, c, now, err.Error())
	case ch.Status != psp.StatusSucceeded:
		res.NoCharge++
		return s.settleCompensation(ctx, c, CompensationNoCharge, ch, psp.Refund{})
	}
	// Our own refund first: a worker whose refund was made but whose answer was lost (or
	// that died before it settled the row) left it under the derived key, and the charge's
	// refunded total now counts it. Recomputing the remainder first would find nothing (or
	// less) left and ask again with another amount, which the provider refuses for a
	// repeated key; the refund already made is the answer.
	refundKey := compensationRefundKey(c.ChargeKey)
	rf, err := s.provider.LookupRefund(pctx, refundKey)
	switch psp.AnswerOf(psp.OpLookupRefund, err).Verdict {
	case psp.VerdictDone:
		res.Refunded++
		return s.settleCompensation(ctx, c, CompensationRefunded, ch, rf)
	case psp.VerdictNone:
	default:
		res.Retry++
		return s.retryCompensation(ctx, c, now, "look up refund: "+err.Error())
	}
	// A disputed charge is not refunded while its dispute is open: the cardholder's bank may
	// still give them the amount back, and a refund besides would pay them twice.
	if ch.DisputeOpen() {
		res.Held++
		return s.holdCompensation(ctx, c, now, ch)
	}
	// What is owed is what the provider has not refunded yet, by any key: an operator may
	// have refunded part or all of the charge at the provider's dashboard. A dispute the
	// cardholder won gave them its amount back through their bank: that much is not owed.
	remainder := ch.Amount - ch.Refunded
	if d := ch.Dispute; d != nil && d.Status == psp.DisputeLost {
		remainder -= d.Amount
		if remainder <= 0 {
			res.DisputeLost++
			s.logger.Warn("compensation settled with no refund: the cardholder won the charge's dispute",
				"source", c.Source, "order_id", c.OrderID.Int64, "charge_id", ch.ID, "dispute_id", d.ID)
			return s.settleCompensation(ctx, c, CompensationDisputeLost, ch, psp.Refund{})
		}
	}
	if remainder <= 0 {
		res.AlreadyRefunded++
		s.logger.Warn("compensation settled with no refund: the provider had already refunded the charge in full",
			"source", c.Source, "order_id", c.OrderID.Int64, "charge_id", ch.ID, "refunded", ch.Refunded)
		return s.settleCompensation(ctx, c, CompensationAlreadyRefunded, ch, psp.Refund{})
	}
	reason := "order canceled while its charge was in flight"
	if c.Source == CompensationByReconcile {
		reason = "charge of no order that can complete with it (reconciliation)"
	}
	rf, err = s.provider.Refund(pctx, psp.RefundRequest{Key: refundKey, ChargeID: ch.ID, Amount: remainder, Reason: reason})
	if psp.AnswerOf(psp.OpRefund, err).Err == psp.ErrKeyReused {
		// Another worker made the refund under this key between our look-up and our
		// request, for another remainder (a dashboard refund came in between): it is the
		// one refund of this compensation.
		rf, err = s.provider.LookupRefund(pctx, refundKey)
	}
	if err != nil {
		// refund_exceeds_charge (look_up): something was refunded since the look-up; the
		// next attempt looks the charge up and computes the remainder again. Any other
		// answer, final or not, is retried too: a compensation is a debt, and an operator
		// sees its last error in the console while it is watched.
		res.Retry++
		return s.retryCompensation(ctx, c, now, "refund: "+err.Error())
	}
	s.crash(CrashCompensationAfterRefund)
	res.Refunded++
	s.logger.Warn("compensated a charge", "source", c.Source, "order_id", c.OrderID.Int64, "charge_id", ch.ID,
		"refund_id", rf.ID, "amount", rf.Amount, "already_refunded", ch.Refunded)
	return s.settleCompensation(ctx, c, CompensationRefunded, ch, rf)
}

// retryCompensation schedules the next look: soon at first, then less often, never less
// often than every ten minutes while the key is watched.
func (s *Service) retryCompensation(ctx context.Context, c compensation, now time.Time, lastErr string) error {
	backoff := time.Second << min(c.Attempts, 10)
	backoff = min(backoff, 10*time.Minute)
	_, err := s.db.ExecContext(ctx, `
		UPDATE compensations SET next_attempt_at = $2, last_error = coalesce($3, last_error)
		 WHERE id = $1 AND state IN `+compensationOpenSQL, c.ID, now.Add(backoff), nullString(lastErr))
	if err != nil {
		return fmt.Errorf("schedule retry: %w", err)
	}
	return nil
}

// holdCompensation holds c while its charge's dispute is open (CompensationDisputed): not
// settled, looked at again as a retry is, and shown with the dispute in the console.
func (s *Service) holdCompensation(ctx context.Context, c compensation, now time.Time, ch psp.Charge) error {
	_, err := s.db.ExecContext(ctx, `
		UPDATE compensations SET state = 'disputed', charge_id = coalesce(charge_id, $2)
		 WHERE id = $1 AND state IN `+compensationOpenSQL, c.ID, ch.ID)
	if err != nil {
		return fmt.Errorf("hold while disputed: %w", err)
	}
	s.logger.Warn("compensation held: the charge's dispute is open", "source", c.Source, "order_id", c.OrderID.Int64,
		"charge_id", ch.ID, "dispute_id", ch.Dispute.ID)
	return s.retryCompensation(ctx, c, now, fmt.Sprintf("held: dispute %s of %d is open; the refund waits for its decision",
		ch.Dispute.ID, ch.Dispute.Amount))
}

// compensationSettlement is the parameters of settleCompensationSQL. The amount and
// currency are those of a refund made, NULL when none was.
type compensationSettlement struct {
	ID       int64          `db:"id"`
	State    string         `db:"state"`
	Now      time.Time      `db:"now"`
	ChargeID sql.NullString `db:"charge_id"` // NULL keeps the one recorded
	RefundID sql.NullString `db:"refund_id"`
	Amount   sql.NullInt64  `db:"amount"`
	Currency sql.NullString `db:"currency"`
}

var settleCompensationSQL = named[compensationSettlement](`
	UPDATE compensations
	   SET state = :state, settled_at = :now, last_error = NULL,
	       charge_id = coalesce(:charge_id, charge_id), refund_id = :refund_id, amount = :amount, currency = :currency
	 WHERE id = :id AND state IN ` + compensationOpenSQL)

// settleCompensation settles c as state; rf is the refund it made (the zero Refund when it
// made none), whose amount is recorded: the remainder of the charge it refunded.
func (s *Service) settleCompensation(ctx context.Context, c compensation, state string, ch psp.Charge, rf psp.Refund) error {
	p := compensationSettlement{ID: c.ID, State: state, Now: s.cfg.Now(), ChargeID: nullString(ch.ID), RefundID: nullString(rf.ID)}
	if rf.ID != "" {
		p.Amount, p.Currency = sql.NullInt64{Int64: rf.Amount, Valid: true}, nullString(ch.Currency)
	}
	if _, err := settleCompensationSQL.exec(ctx, s.db, p); err != nil {
		return fmt.Errorf("settle as %s: %w", state, err)
	}
	return nil
}
