package checkout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// CompleterConfig tunes the completer; the zero value of a field takes its default.
type CompleterConfig struct {
	// Interval between passes of Run.
	Interval time.Duration
	// Grace is how long after a key's lease lapsed the completer leaves it alone: the
	// client gets the first chance to retry (with the card token, so its retry can still
	// charge).
	Grace time.Duration
	// AttentionAfter is how long after its first arrival a key whose provider outcome
	// cannot be learnt is handed to an operator (state needs_attention).
	AttentionAfter time.Duration
	// Batch is how many keys one pass takes on.
	Batch int
}

func (c CompleterConfig) withDefaults() CompleterConfig {
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
	if c.Grace == 0 {
		c.Grace = time.Minute
	}
	if c.AttentionAfter == 0 {
		c.AttentionAfter = time.Hour
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	return c
}

// CompleterResult counts what one pass did.
type CompleterResult struct {
	Completed int // settled from what the provider recorded (paid, declined, refunded)
	Canceled  int // the provider fenced the key (or could not, and a refund is owed): the order is canceled
	Attention int // handed to an operator
	Retry     int // the provider could not answer; tried again next pass
	// Compensations driven in the same pass (see compensateDue).
	Compensated     int // charges found under given-up keys and refunded
	CompensationsOK int // given-up keys confirmed to hold no charge
}

// Completer drives abandoned keys to an outcome, so that a customer who closed the app ends
// with a paid order or no charge at all, never a charge without an order. It runs in every
// serve process; the lease takeover decides which process works on a key.
//
// It never charges a card (it has no card token: those are not stored). For an order it
// asks the provider whether the charge was made: if so it settles the order as the first
// worker would have; if not, it cancels the order. A refund it can finish itself: the
// refund needs no token.
type Completer struct {
	s   *Service
	cfg CompleterConfig

	mu    sync.Mutex
	total CompleterResult // over the life of the process, for operators
}

// NewCompleter returns a completer working for s.
func (s *Service) NewCompleter(cfg CompleterConfig) *Completer {
	return &Completer{s: s, cfg: cfg.withDefaults()}
}

// Run completes every Interval until ctx ends.
func (c *Completer) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := c.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			c.s.logger.Warn("completer pass failed", "err", err)
		}
		if res != (CompleterResult{}) {
			c.s.logger.Info("completer", "completed", res.Completed, "canceled", res.Canceled,
				"attention", res.Attention, "retry", res.Retry,
				"compensated", res.Compensated, "compensations_without_charge", res.CompensationsOK)
		}
	}
}

// Totals is what this process's completer has done since it started.
func (c *Completer) Totals() CompleterResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// abandonedKeysSQL lists up to $2 keys in progress whose lease lapsed before $1 (or that
// hold none), oldest first. "response_status IS NULL" (only unfinished keys lack a
// response) is what lets the small partial index of unfinished keys answer it.
const abandonedKeysSQL = `
	SELECT ` + keyed.Columns + ` FROM idempotency_keys
	 WHERE state = 'in_progress' AND response_status IS NULL
	   AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
	 ORDER BY created_at
	 LIMIT $2`

// Pass takes on every key abandoned for longer than Grace, up to Batch of them.
func (c *Completer) Pass(ctx context.Context) (CompleterResult, error) {
	now := c.s.cfg.Now()
	var keys []Key
	err := sqlx.SelectContext(ctx, c.s.q, &keys, abandonedKeysSQL, now.Add(-c.cfg.Grace), c.cfg.Batch)
	if err != nil {
		return CompleterResult{}, fmt.Errorf("completer: find abandoned keys: %w", err)
	}
	var res CompleterResult
	var errs []error
	for i := range keys {
		k, err := keyed.TakeOver(ctx, c.s.q, &keys[i], now, c.s.cfg.Lease)
		if errors.Is(err, keyed.ErrNoKey) {
			continue // a retry or another completer got there first
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.complete(context.WithoutCancel(ctx), k, now, &res); err != nil {
			errs = append(errs, fmt.Errorf("key %d: %w", k.ID, err))
		}
	}
	comp, err := c.s.compensateDue(ctx, c.cfg.Batch, c.s.cfg.Lease)
	if err != nil {
		errs = append(errs, err)
	}
	res.Compensated, res.CompensationsOK = comp.Refunded, comp.NoCharge
	res.Retry += comp.Retry
	c.mu.Lock()
	c.total.Compensated += res.Compensated
	c.total.CompensationsOK += res.CompensationsOK
	c.total.Completed += res.Completed
	c.total.Canceled += res.Canceled
	c.total.Attention += res.Attention
	c.total.Retry += res.Retry
	c.mu.Unlock()
	return res, errors.Join(errs...)
}

func (c *Completer) complete(ctx context.Context, k *Key, now time.Time, res *CompleterResult) error {
	pctx, cancel := context.WithTimeout(ctx, c.s.cfg.ProviderTimeout)
	defer cancel()
	var err error
	if k.RefundID.Valid {
		// A refund needs no card: finish it as a retry would.
		_, err = (&refundOp{s: c.s}).Run(ctx, k, true)
		var p *problem.Problem
		if err == nil {
			res.Completed++
			return nil
		}
		if !errors.As(err, &p) {
			return err
		}
		if p.Code == problem.CodeNeedsAttention {
			res.Attention++ // the provider refused what tekrar derived (providerFailed)
			return nil
		}
	} else {
		pk := providerKey("charge", k)
		var ch psp.Charge
		ch, err = c.s.provider.LookupCharge(pctx, pk)
		var settle func(sqlx.QueryerContext) (Response, psp.Charge, error)
		switch {
		case err == nil:
			settle = func(db sqlx.QueryerContext) (Response, psp.Charge, error) {
				r, err := c.s.settleCharge(ctx, db, k, ch, pk)
				return r, ch, err
			}
		case psp.AnswerOf(psp.OpLookupCharge, err).Verdict == psp.VerdictNone:
			// No charge yet is not no charge ever: the worker that lost this key may still
			// have its request in flight. Fence the key at the provider first.
			settle, err = c.s.giveUpCharge(ctx, k, "completer gave up on a charge whose worker was gone")
		case psp.AnswerOf(psp.OpLookupCharge, err).Verdict == psp.VerdictAttention:
			// The provider refuses the look-up of the key tekrar derived: no later pass will
			// do better.
			if err := markAttention(ctx, c.s.q, k, fmt.Sprintf("the payment provider refused the look-up: %v", err)); err != nil {
				return err
			}
			res.Attention++
			return nil
		}
		if settle != nil {
			_, got, err := settle(c.s.q)
			if err != nil {
				return err
			}
			if got.Status == psp.StatusCanceled {
				res.Canceled++
			} else {
				res.Completed++
			}
			return nil
		}
	}
	// The provider could not tell: try again later, or hand it to an operator once it has
	// been unresolved for too long. Never expire it silently.
	if now.Sub(k.CreatedAt) >= c.cfg.AttentionAfter {
		reason := fmt.Sprintf("payment provider unreachable for %s: %v", now.Sub(k.CreatedAt).Round(time.Second), err)
		if err := markAttention(ctx, c.s.q, k, reason); err != nil {
			return err
		}
		res.Attention++
		return nil
	}
	if _, err := keyed.SetStateIfInProgress(ctx, c.s.q, keyed.Release(k, now)); err != nil {
		return err
	}
	res.Retry++
	return nil
}

// orderView is an order as its 201 shows it, read back from the database.
func (s *Service) orderView(ctx context.Context, orderID int64) (OrderView, error) {
	r, err := getOrder(ctx, s.q, `o.id = $1`, orderID)
	if err != nil {
		return OrderView{}, fmt.Errorf("read order %d: %w", orderID, err)
	}
	v, err := r.view()
	if err != nil {
		return OrderView{}, err
	}
	v.Payment = nil
	return v, s.withInstallments(ctx, &v, orderID)
}

// markAttention hands a key to an operator, with its order's order.needs_attention event
// (a refund's key names the refund's order) written by the same statement, fenced with it.
func markAttention(ctx context.Context, db sqlx.ExecerContext, k *Key, reason string) error {
	_, err := markAttentionSQL.exec(ctx, db, keyed.NeedsAttention(k, reason))
	if err != nil {
		return fmt.Errorf("mark needs attention: %w", err)
	}
	return nil
}

// markAttentionSQL: see markAttention. The event step reads the key's order (or refund)
// from k, so it writes nothing when the fence matched no row.
var markAttentionSQL = named[keyed.SetState](`
	WITH k AS (` + keyed.SetStateSQL + `
	    RETURNING order_id, refund_id, attention_reason
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.OrderNeedsAttention) + `, o.id, ` + orderPayloadSQL + ` || jsonb_build_object(
	               'refund', r.public_id, 'reason', k.attention_reason), now()
	      FROM k
	      LEFT JOIN refunds r ON r.id = k.refund_id
	      JOIN orders o ON o.id = coalesce(k.order_id, r.order_id)
	)` + outbox.InsertSQL)
