package installments

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/psp"
	tdb "github.com/tekrar/tekrar/internal/db"
)

// The defaults of Config's fields, for a field left zero.
const (
	// LeaseDefault is Config.Lease's default, checkout.Config's.
	LeaseDefault = 30 * time.Second
	// ProviderTimeoutDefault is Config.ProviderTimeout's default, checkout.Config's.
	ProviderTimeoutDefault = 10 * time.Second
)

// Config tunes the runs; the zero value of a field takes its default.
type Config struct {
	// Observe, when not nil, is told what every run did, also a run that stopped on an
	// error (metrics).
	Observe func(Result, error)
	// Lease is how long a run holds an installment it claimed before another may take it
	// over (and look its charge up first). It must outlast ProviderTimeout, as checkout's
	// keys' lease does. Default LeaseDefault (30 seconds).
	Lease time.Duration
	// ProviderTimeout bounds one provider call; past it the outcome is unknown and the
	// installment keeps its lease. Default ProviderTimeoutDefault (10 seconds).
	ProviderTimeout time.Duration
	// Crash, if set, is called at the crash points checkout.CrashInstallmentAfterClaim and
	// checkout.CrashInstallmentAfterProvider, so that the crash harness can kill the process
	// there (as checkout.Config's Crash). Nil in production.
	Crash func(point string)
	// Now is the clock of the leases and records (a run is given the instant it charges
	// as of). Default time.Now.
	Now func() time.Time
}

// withDefaults fills the fields left zero with their defaults.
func (c Config) withDefaults() Config {
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.ProviderTimeout = cmp.Or(c.ProviderTimeout, ProviderTimeoutDefault)
	if c.Crash == nil {
		c.Crash = func(string) {}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// mustValidate panics on a setting no run can work with. The server's settings are bounded
// when they are read (internal/config), so this is a programming error, caught at start.
func (c Config) mustValidate() Config {
	switch {
	case c.Lease < 0:
		panic(fmt.Sprintf("installments: Lease %s, want zero (the default) or more", c.Lease))
	case c.ProviderTimeout < 0:
		panic(fmt.Sprintf("installments: ProviderTimeout %s, want zero (the default) or more", c.ProviderTimeout))
	}
	return c
}

// Charger charges the installments that fall due. Serve runs it as the scheduled task
// "installments"; `tekrar installments run` runs it by hand.
type Charger struct {
	db       *sqlx.DB
	provider psp.Provider
	cfg      Config
	logger   *slog.Logger
}

// New returns a Charger over db that charges at provider and logs to logger (nothing when
// nil). It panics on a Config no run can work with (a negative Lease or ProviderTimeout).
func New(db *sqlx.DB, provider psp.Provider, cfg Config, logger *slog.Logger) *Charger {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Charger{db: db, provider: provider, cfg: cfg.withDefaults().mustValidate(), logger: logger}
}

// Why an installment is handed to an operator: the reason of its installment.needs_attention
// event (docs/outbox.md).
const (
	attentionRetriesExhausted = "retries_exhausted" // declined on its last retry
	attentionProviderRefused  = "provider_refused"  // the provider refused the request itself
	// attentionNotResent: an attempt whose answer was lost is not found at a provider that
	// would make a repeat a new charge (past its key window, or without keys).
	attentionNotResent = "not_resent"
)

// Result counts what one run did.
type Result struct {
	Charged   int // installments paid by this run
	Retry     int // declined, tried again on the next retry day
	Attention int // declined on the last retry: an operator's
	Unknown   int // the provider's answer never came: the next run after the lease looks the charge up
	Fenced    int // another process took the installment over meanwhile; it records the outcome
}

// String says what the run did, for its run record and `tekrar installments run`.
func (r Result) String() string {
	return fmt.Sprintf("%d installments charged, %d declined and rescheduled, %d declined for an operator, %d with an unknown outcome, %d taken over by another process",
		r.Charged, r.Retry, r.Attention, r.Unknown, r.Fenced)
}

// Run charges every installment due at now: those whose due date (or retry day) has started
// in their client's time zone. It is the job a scheduler runs (every few minutes; a run finds
// nothing to do in most) and `tekrar installments run` runs by hand.
//
// Any number of runs may go at once, on any number of processes, and a run may die at any
// point: each installment is taken by one run at a time (FOR UPDATE SKIP LOCKED, then a
// lease), every attempt is charged under its derived provider key (checkout.InstallmentKey),
// and an attempt taken over after a crash is looked up at the provider before it is charged.
// The outcome is recorded fenced by the lease token, with its outbox event in the same
// statement. An installment whose provider answer never came keeps its lease until it
// lapses, so a run does not take it twice.
func (s *Charger) Run(ctx context.Context, now time.Time) (Result, error) {
	res, err := s.run(ctx, now)
	if s.cfg.Observe != nil {
		s.cfg.Observe(res, err)
	}
	return res, err
}

func (s *Charger) run(ctx context.Context, now time.Time) (Result, error) {
	var res Result
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
		s.cfg.Crash(checkout.CrashInstallmentAfterClaim)
		if err := s.chargeInstallment(ctx, c, now, &res); err != nil {
			return res, err
		}
	}
}

// claimInstallment takes one due installment for an attempt: the attempt in flight again if
// the last holder left it so (a crash, an unknown outcome), or the next one. sql.ErrNoRows:
// nothing is due.
func (s *Charger) claimInstallment(ctx context.Context, now time.Time) (*installmentClaim, error) {
	var c installmentClaim
	err := tdb.InTx(ctx, s.db, "claim an installment", func(tx *sqlx.Tx) error {
		clock := s.cfg.Now()
		if err := tx.GetContext(ctx, &c, dueInstallmentSQL, now, clock); err != nil {
			return err
		}
		c.Resumed = c.InFlight
		if !c.InFlight {
			c.Attempts++
		}
		c.Key = checkout.InstallmentKey(c.OrderID, c.OrderCreated, c.OrderIntent, c.N, c.Attempts)
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
func (s *Charger) chargeInstallment(ctx context.Context, c *installmentClaim, now time.Time, res *Result) error {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	var ch psp.Charge
	var err error
	if c.Resumed {
		// Found the way the provider can (checkout.FindCharge), and sent again only while
		// the provider answers a repeat with the first charge: past its key window, or at a
		// provider without keys, an attempt not found goes to an operator, who can see
		// whether it was charged; a second charge would not be undone.
		promises := psp.PromisesOf(s.provider)
		var found checkout.FoundCharge
		found, err = checkout.FindCharge(pctx, s.provider, promises, checkout.ChargeRef{Key: c.Key,
			Reference: checkout.InstallmentDescription(c.OrderPublic, c.N), Amount: c.Amount, Currency: c.Currency,
			Since: c.TakenAt}, s.cfg.Now())
		ch = found.Charge
		for _, o := range found.Others {
			s.logger.Error("the provider charged an installment more than once: the later charge is owed back",
				"order_id", c.OrderID, "n", c.N, "settled_with", ch.ID, "charge_id", o.ID)
		}
		if psp.NoChargeYet(err) && !psp.MayResend(promises, s.cfg.Now().Sub(c.TakenAt)) {
			s.logger.Error("installment attempt not found and not sent again: the provider would charge it anew",
				"order_id", c.OrderID, "n", c.N, "attempt", c.Attempts, "provider", promises.Provider)
			return s.recordInstallment(ctx, c, res, &res.Attention, installmentDeclinedSQL, c.OrderID, c.N, c.LeaseToken,
				nil, attentionNotResent, s.cfg.Now(), attentionNotResent)
		}
	}
	if !c.Resumed || psp.NoChargeYet(err) {
		ch, err = s.provider.Charge(pctx, psp.ChargeRequest{
			Key: c.Key, Amount: c.Amount, Currency: c.Currency,
			Customer: c.ProviderCustomer.String, PaymentMethod: c.PaymentMethod.String,
			Description: checkout.InstallmentDescription(c.OrderPublic, c.N),
		})
	}
	s.cfg.Crash(checkout.CrashInstallmentAfterProvider)
	switch {
	case err == nil && ch.Status == psp.StatusSucceeded:
		if err := s.recordInstallment(ctx, c, res, &res.Charged, installmentPaidSQL, c.OrderID, c.N, c.LeaseToken, ch.ID, s.cfg.Now()); err != nil {
			return err
		}
		s.logger.Info("installment charged", "order_id", c.OrderID, "n", c.N, "attempt", c.Attempts, "charge_id", ch.ID)
		return nil
	case err == nil && ch.Status == psp.StatusDeclined:
		return s.declineInstallment(ctx, c, now, ch.DeclineCode, res)
	case psp.ChargeOutcomeUnknown(err):
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
func (s *Charger) declineInstallment(ctx context.Context, c *installmentClaim, now time.Time, code string, res *Result) error {
	loc, err := clients.Location(c.TimeZone)
	if err != nil {
		return fmt.Errorf("installment %d of order %d: %w", c.N, c.OrderID, err)
	}
	due := calendar.Day{Year: c.DueOn.Year(), Month: c.DueOn.Month(), Day: c.DueOn.Day()}
	var next sql.NullTime
	var reason sql.NullString
	counter := &res.Attention
	if t, ok := nextInstallmentAttempt(due, c.Attempts, now, loc); ok {
		next, counter = sql.NullTime{Time: t, Valid: true}, &res.Retry
	} else {
		reason = tdb.NullString(attentionRetriesExhausted)
	}
	return s.recordInstallment(ctx, c, res, counter, installmentDeclinedSQL, c.OrderID, c.N, c.LeaseToken,
		next, tdb.NullString(code), s.cfg.Now(), reason)
}

// recordInstallment runs one fenced outcome statement and counts it in counter, or in
// Fenced when the lease was taken over.
func (s *Charger) recordInstallment(ctx context.Context, c *installmentClaim, res *Result, counter *int, query string, args ...any) error {
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

// installmentRetryDays are the days after its due date on which a declined installment is
// tried again, in the client's time zone; after the last one an operator decides.
var installmentRetryDays = []int{1, 3, 7}

// nextInstallmentAttempt is when attempt attempts+1 of an installment due on dueOn is made,
// after attempts declined: on the retry days after the due date, but never before the day
// after now (a job that ran late does not spend every retry in one run). ok is false when
// the retries are spent.
func nextInstallmentAttempt(dueOn calendar.Day, attempts int, now time.Time, loc *time.Location) (time.Time, bool) {
	if attempts < 1 || attempts > len(installmentRetryDays) {
		return time.Time{}, false
	}
	next := dueOn.AddDays(installmentRetryDays[attempts-1]).Start(loc)
	if tomorrow := calendar.Of(now, loc).Next().Start(loc); next.Before(tomorrow) {
		next = tomorrow
	}
	return next, true
}
