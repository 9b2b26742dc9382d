package completer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// The defaults of Config's fields, for a field left zero.
const (
	// IntervalDefault is Config.Interval's default.
	IntervalDefault = 10 * time.Second
	// GraceDefault is Config.Grace's default.
	GraceDefault = time.Minute
	// AttentionAfterDefault is Config.AttentionAfter's default.
	AttentionAfterDefault = time.Hour
	// BatchDefault is Config.Batch's default.
	BatchDefault = 100
)

// Config tunes the completer; the zero value of a field takes its default.
type Config struct {
	// Interval between passes of Run. Default IntervalDefault (10 seconds).
	Interval time.Duration
	// Grace is how long after a key's lease lapsed the completer leaves it alone: the
	// client gets the first chance to retry (with the card token, so its retry can still
	// charge). Default GraceDefault (1 minute).
	Grace time.Duration
	// AttentionAfter is how long after its first arrival a key whose provider outcome
	// cannot be learnt is handed to an operator (state needs_attention). Default
	// AttentionAfterDefault (1 hour).
	AttentionAfter time.Duration
	// Batch is how many keys one pass takes on. Default BatchDefault (100).
	Batch int
}

// withDefaults fills the fields left zero with their defaults.
func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.Grace = cmp.Or(c.Grace, GraceDefault)
	c.AttentionAfter = cmp.Or(c.AttentionAfter, AttentionAfterDefault)
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	return c
}

// mustValidate panics on a setting no pass can run with. The server's settings are bounded
// when they are read (internal/config), so this is a programming error, caught at start.
func (c Config) mustValidate() Config {
	switch {
	case c.Interval < 0:
		panic(fmt.Sprintf("completer: Interval %s, want zero (the default) or more", c.Interval))
	case c.Grace < 0:
		panic(fmt.Sprintf("completer: Grace %s, want zero (the default) or more", c.Grace))
	case c.AttentionAfter < 0:
		panic(fmt.Sprintf("completer: AttentionAfter %s, want zero (the default) or more", c.AttentionAfter))
	case c.Batch < 0:
		panic(fmt.Sprintf("completer: Batch %d, want zero (the default) or more", c.Batch))
	}
	return c
}

// Result counts what one pass did.
type Result struct {
	Completed int // settled from what the provider recorded (paid, declined, refunded)
	Canceled  int // the provider fenced the key (or could not, and a refund is owed): the order is canceled
	Attention int // handed to an operator
	Retry     int // the provider could not answer; tried again next pass
	// Compensations driven in the same pass (checkout.Service.CompensateDue).
	Compensated     int // charges found under given-up keys and refunded
	CompensationsOK int // given-up keys confirmed to hold no charge
}

// String says what the pass did, for the log.
func (r Result) String() string {
	return fmt.Sprintf("completed %d, canceled %d, attention %d, retry %d, compensated %d, compensations without charge %d",
		r.Completed, r.Canceled, r.Attention, r.Retry, r.Compensated, r.CompensationsOK)
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
	db     *sqlx.DB
	s      *checkout.Service
	cfg    Config
	logger *slog.Logger

	mu    sync.Mutex
	total Result // over the life of the process, for operators
}

// New returns a completer working for s, whose database db is: it reads the work list and
// gives leases back there. It panics on a Config no pass can run with (a negative field).
func New(db *sqlx.DB, s *checkout.Service, cfg Config, logger *slog.Logger) *Completer {
	return &Completer{db: db, s: s, cfg: cfg.withDefaults().mustValidate(), logger: logger}
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
			c.logger.Warn("completer pass failed", "err", err)
		}
		if res != (Result{}) {
			c.logger.Info("completer", "completed", res.Completed, "canceled", res.Canceled,
				"attention", res.Attention, "retry", res.Retry,
				"compensated", res.Compensated, "compensations_without_charge", res.CompensationsOK)
		}
	}
}

// Totals is what this process's completer has done since it started.
func (c *Completer) Totals() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Pass takes on every key abandoned for longer than Grace, up to Batch of them.
func (c *Completer) Pass(ctx context.Context) (Result, error) {
	now := c.s.Now()
	keys, err := keyed.Abandoned(ctx, c.db, now.Add(-c.cfg.Grace), c.cfg.Batch)
	if err != nil {
		return Result{}, fmt.Errorf("completer: find abandoned keys: %w", err)
	}
	var res Result
	var errs []error
	for i := range keys {
		k, err := c.s.TakeOver(ctx, &keys[i], now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if k == nil {
			continue // a retry or another completer got there first
		}
		if err := c.complete(context.WithoutCancel(ctx), k, now, &res); err != nil {
			errs = append(errs, fmt.Errorf("key %d: %w", k.ID, err))
		}
	}
	comp, err := c.s.CompensateDue(ctx, c.cfg.Batch)
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

func (c *Completer) complete(ctx context.Context, k *checkout.Key, now time.Time, res *Result) error {
	var err error
	if k.RefundID.Valid {
		// A refund needs no card: finish it as a retry would.
		err = c.s.ResumeRefund(ctx, k)
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
		// No charge yet is not no charge ever: the worker that lost this key may still have
		// its request in flight, so ResolveCharge fences the key at the provider first.
		r := c.s.ResolveCharge(ctx, k, "completer gave up on a charge whose worker was gone")
		err = r.Err
		if r.LookupRefused {
			// The provider refuses the look-up of the key tekrar derived: no later pass will
			// do better.
			if err := c.s.MarkAttention(ctx, k, fmt.Sprintf("the payment provider refused the look-up: %v", err)); err != nil {
				return err
			}
			res.Attention++
			return nil
		}
		if r.Settle != nil {
			got, err := r.Settle(nil)
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
		if err := c.s.MarkAttention(ctx, k, reason); err != nil {
			return err
		}
		res.Attention++
		return nil
	}
	// The lease ends now, so that the client's retry can resume at once: the work is not
	// done, and nobody is doing it.
	if _, err := keyed.SetStateIfInProgress(ctx, c.db, keyed.Release(k, now)); err != nil {
		return err
	}
	res.Retry++
	return nil
}
