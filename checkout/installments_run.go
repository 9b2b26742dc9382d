package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/psp"
)

// Crash points of the installment job.
const (
	// CrashInstallmentAfterClaim: an attempt is claimed and leased; the provider was not called.
	CrashInstallmentAfterClaim = "installment_after_claim"
	// CrashInstallmentAfterProvider: the provider answered an attempt; nothing of it is stored.
	CrashInstallmentAfterProvider = "installment_after_provider"
)

// Why an installment is handed to an operator: the reason of its installment.needs_attention
// event (docs/outbox.md).
const (
	attentionRetriesExhausted = "retries_exhausted" // declined on its last retry
	attentionProviderRefused  = "provider_refused"  // the provider refused the request itself
)

// InstallmentRunResult counts what one run of ChargeDueInstallments did.
type InstallmentRunResult struct {
	Charged   int // installments paid by this run
	Retry     int // declined, tried again on the next retry day
	Attention int // declined on the last retry: an operator's
	Unknown   int // the provider's answer never came: the next run after the lease looks the charge up
	Fenced    int // another process took the installment over meanwhile; it records the outcome
}

func (r InstallmentRunResult) String() string {
	return fmt.Sprintf("%d installments charged, %d declined and rescheduled, %d declined for an operator, %d with an unknown outcome, %d taken over by another process",
		r.Charged, r.Retry, r.Attention, r.Unknown, r.Fenced)
}

// ChargeDueInstallments charges every installment due at now: those whose due date (or
// retry day) has started in their client's time zone. It is the job a scheduler runs (every
// few minutes; a run finds nothing to do in most) and `tekrar installments run` runs by hand.
//
// Any number of runs may go at once, on any number of processes, and a run may die at any
// point: each installment is taken by one run at a time (FOR UPDATE SKIP LOCKED, then a
// lease), every attempt is charged under its derived provider key (installmentKey), and an
// attempt taken over after a crash is looked up at the provider before it is charged. The
// outcome is recorded fenced by the lease token, with its outbox event in the same statement. An installment whose provider answer never
// came keeps its lease until it lapses, so a run does not take it twice.
func (s *Service) ChargeDueInstallments(ctx context.Context, now time.Time) (summary string, err error) {
	res, err := s.chargeDueInstallments(ctx, now)
	if s.cfg.ObserveInstallments != nil {
		s.cfg.ObserveInstallments(res, err)
	}
	return res.String(), err
}

func (s *Service) chargeDueInstallments(ctx context.Context, now time.Time) (InstallmentRunResult, error) {
	var res InstallmentRunResult
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		c, err := s.claimInstallment(ctx, now)
		if errors.Is(err, sql.ErrNoRows) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		s.crash(CrashInstallmentAfterClaim)
		if err := s.chargeInstallment(ctx, c, now, &res); err != nil {
			return res, err
		}
	}
}

// claimInstallment takes one due installment for an attempt: the attempt in flight again if
// the last holder left it so (a crash, an unknown outcome), or the next one. sql.ErrNoRows:
// nothing is due.
func (s *Service) claimInstallment(ctx context.Context, now time.Time) (*installmentClaim, error) {
	var c installmentClaim
	err := inTx(ctx, s.db, "claim an installment", func(tx *sqlx.Tx) error {
		clock := s.cfg.Now()
		if err := tx.GetContext(ctx, &c, dueInstallmentSQL, now, clock); err != nil {
			return err
		}
		c.Resumed = c.InFlight
		if !c.InFlight {
			c.Attempts++
		}
		c.Key = installmentKey(c.OrderID, c.OrderCreated, c.OrderIntent, c.N, c.Attempts)
		return tx.GetContext(ctx, &c.LeaseToken, takeInstallmentSQL, c.OrderID, c.N, c.Attempts, c.Key,
			clock.Add(s.cfg.Lease), clock)
	})
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("claim an installment: %w", err)
	}
	return &c, nil
}

// chargeInstallment makes c's attempt at the provider and records its outcome.
func (s *Service) chargeInstallment(ctx context.Context, c *installmentClaim, now time.Time, res *InstallmentRunResult) error {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	var ch psp.Charge
	var err error
	if c.Resumed {
		ch, err = s.provider.LookupCharge(pctx, c.Key)
	}
	if !c.Resumed || answerOf(opLookupCharge, err).Verdict == verdictNone {
		ch, err = s.provider.Charge(pctx, psp.ChargeRequest{
			Key: c.Key, Amount: c.Amount, Currency: c.Currency,
			Customer: c.ProviderCustomer.String, PaymentMethod: c.PaymentMethod.String,
			Description: installmentDescription(c.OrderID, c.N),
		})
	}
	s.crash(CrashInstallmentAfterProvider)
	switch {
	case err == nil && ch.Status == psp.StatusSucceeded:
		if err := s.recordInstallment(ctx, c, res, &res.Charged, installmentPaidSQL, c.OrderID, c.N, c.LeaseToken, ch.ID, s.cfg.Now()); err != nil {
			return err
		}
		s.logger.Info("installment charged", "order_id", c.OrderID, "n", c.N, "attempt", c.Attempts, "charge_id", ch.ID)
		return nil
	case err == nil && ch.Status == psp.StatusDeclined:
		return s.declineInstallment(ctx, c, now, ch.DeclineCode, res)
	case answerOf(opCharge, err).Verdict == verdictUnknown:
		// Keep the lease: the next run after it lapses looks the charge up.
		res.Unknown++
		s.logger.Warn("installment charge outcome unknown", "order_id", c.OrderID, "n", c.N, "attempt", c.Attempts, "err", err)
		return nil
	default:
		// The provider refused the request (a canceled key, a reused key, an invalid
		// request): no retry will do better. An operator looks at it.
		s.logger.Error("installment charge refused by the provider", "order_id", c.OrderID, "n", c.N, "attempt", c.Attempts, "err", err)
		return s.recordInstallment(ctx, c, res, &res.Attention, installmentDeclinedSQL, c.OrderID, c.N, c.LeaseToken,
			nil, attentionProviderRefused, s.cfg.Now(), attentionProviderRefused)
	}
}

// declineInstallment schedules the next attempt of a declined installment, or hands it to
// an operator when the retries are spent.
func (s *Service) declineInstallment(ctx context.Context, c *installmentClaim, now time.Time, code string, res *InstallmentRunResult) error {
	loc, err := clients.Location(c.TimeZone)
	if err != nil {
		return fmt.Errorf("installment %d of order %d: %w", c.N, c.OrderID, err)
	}
	due := Day{c.DueOn.Year(), c.DueOn.Month(), c.DueOn.Day()}
	var next sql.NullTime
	var reason sql.NullString
	counter := &res.Attention
	if t, ok := nextInstallmentAttempt(due, c.Attempts, now, loc); ok {
		next, counter = nullTime(t), &res.Retry
	} else {
		reason = nullString(attentionRetriesExhausted)
	}
	return s.recordInstallment(ctx, c, res, counter, installmentDeclinedSQL, c.OrderID, c.N, c.LeaseToken,
		next, nullString(code), s.cfg.Now(), reason)
}

// recordInstallment runs one fenced outcome statement and counts it in counter, or in
// Fenced when the lease was taken over.
func (s *Service) recordInstallment(ctx context.Context, c *installmentClaim, res *InstallmentRunResult, counter *int, query string, args ...any) error {
	var id int64
	err := s.db.GetContext(ctx, &id, query, args...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		res.Fenced++
		s.logger.Info("installment taken over by another process; its outcome is theirs to record",
			"order_id", c.OrderID, "n", c.N, "attempt", c.Attempts)
		return nil
	case err != nil:
		return fmt.Errorf("record installment %d of order %d: %w", c.N, c.OrderID, err)
	}
	*counter++
	return nil
}
