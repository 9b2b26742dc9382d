package reconcile

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/psp"
	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/process"
)

// The defaults of Config's fields, for a field left zero.
const (
	// PageSizeDefault is Config.PageSize's default: the most charges the provider lists at once.
	PageSizeDefault = psp.MaxListLimit
	// ProviderTimeoutDefault is Config.ProviderTimeout's default, checkout.Config's.
	ProviderTimeoutDefault = 10 * time.Second
	// ProviderHorizonDefault is Config.ProviderHorizon's default, checkout.Config's.
	ProviderHorizonDefault = 24 * time.Hour
)

// Config says how runs are made and recorded; the zero value of a field takes its default.
type Config struct {
	// Scheduled: serve's schedule starts the runs, not an operator (recorded with each run,
	// shown in the console).
	Scheduled bool
	// PageSize is how many charges are asked for at once, and how many paid orders are read
	// at once. Default PageSizeDefault (psp.MaxListLimit), which is also its most.
	PageSize int
	// ProviderTimeout bounds one provider call, as checkout.Config's does. Default
	// ProviderTimeoutDefault (10 seconds).
	ProviderTimeout time.Duration
	// ProviderHorizon is how long after a run a charge may still be made under the key of a
	// charge it found (checkout.Config's): the compensation it owes is watched until then.
	// Default ProviderHorizonDefault (24 hours).
	ProviderHorizon time.Duration
	// Crash, if set, is called at the crash point checkout.CrashReconcileAfterOrphan, so
	// that the crash harness can kill the process there (as checkout.Config's Crash). Nil in
	// production.
	Crash func(point string)
	// Now is the clock; tests inject one. Default time.Now.
	Now func() time.Time
}

// withDefaults fills the fields left zero with their defaults.
func (c Config) withDefaults() Config {
	c.PageSize = cmp.Or(c.PageSize, PageSizeDefault)
	c.ProviderTimeout = cmp.Or(c.ProviderTimeout, ProviderTimeoutDefault)
	c.ProviderHorizon = cmp.Or(c.ProviderHorizon, ProviderHorizonDefault)
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
	case c.PageSize < 1 || c.PageSize > psp.MaxListLimit:
		panic(fmt.Sprintf("reconcile: PageSize %d, want 1 to %d (zero: the default)", c.PageSize, psp.MaxListLimit))
	case c.ProviderTimeout < 0:
		panic(fmt.Sprintf("reconcile: ProviderTimeout %s, want zero (the default) or more", c.ProviderTimeout))
	case c.ProviderHorizon < 0:
		panic(fmt.Sprintf("reconcile: ProviderHorizon %s, want zero (the default) or more", c.ProviderHorizon))
	}
	return c
}

// Result counts what a run found and did.
type Result struct {
	RunID                int64
	ChargesSeen          int // charges of the window at the provider (canceled keys left out)
	Pending              int // charges of orders that can still complete with them
	Orphans              int // charges of no completable order
	CompensationsCreated int // of them, the compensations this run wrote (not a rerun's, nor the cancel's)
	RefundsMade          int // compensations this run drove to a refund
	Mismatches           int // charges whose amount or currency is not their order's
	PaidWithoutCharge    int // orders recorded paid with no succeeded charge at the provider
}

// String says what the run found and did, for the scheduled task's run record.
func (r Result) String() string {
	return fmt.Sprintf("run %d: %d charges, %d pending, %d orphans (%d compensations created, %d refunds made), %d mismatches, %d paid without charge",
		r.RunID, r.ChargesSeen, r.Pending, r.Orphans, r.CompensationsCreated, r.RefundsMade, r.Mismatches, r.PaidWithoutCharge)
}

// Reconciler runs reconciliations. Serve runs it as the scheduled task "reconcile" and
// `tekrar reconcile` by hand; it takes no lock (see the package doc).
type Reconciler struct {
	db       *sqlx.DB
	provider psp.Provider
	svc      *checkout.Service // drives the compensations a run meets
	cfg      Config
	logger   *slog.Logger
}

// New returns a reconciler of the charges at provider with the orders in db; svc drives
// the refunds a run owes, as the completer does. It panics on a Config no run can work with
// (a PageSize past psp.MaxListLimit, a negative duration).
func New(db *sqlx.DB, provider psp.Provider, svc *checkout.Service, cfg Config, logger *slog.Logger) *Reconciler {
	return &Reconciler{db: db, provider: provider, svc: svc, cfg: cfg.withDefaults().mustValidate(), logger: logger}
}

// Run runs one reconciliation of the charges created in [since, until).
func (rc *Reconciler) Run(ctx context.Context, since, until time.Time) (Result, error) {
	if !since.Before(until) {
		return Result{}, fmt.Errorf("reconcile: the window's start %s is not before its end %s",
			since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	r := &reconcileRun{rc: rc, actor: "reconcile@" + process.Name(), seen: map[string]bool{}}
	if err := rc.db.GetContext(ctx, &r.res.RunID, startRunSQL, process.Name(), rc.cfg.Scheduled, since, until, rc.cfg.Now()); err != nil {
		return Result{}, fmt.Errorf("reconcile: record the run: %w", err)
	}
	err := r.walk(ctx, since, until)
	if err == nil {
		err = r.paidWithoutCharge(ctx, since, until)
	}
	// Drive what the walk met even after an error: those debts are recorded already.
	if derr := r.drive(ctx); derr != nil {
		err = errors.Join(err, derr)
	}
	res := r.res
	p := runFinish{ID: res.RunID, Now: rc.cfg.Now(), Seen: res.ChargesSeen, Orphans: res.Orphans,
		Created: res.CompensationsCreated, Refunds: res.RefundsMade, Mismatch: res.Mismatches, Unpaid: res.PaidWithoutCharge}
	if err != nil {
		p.Error = tdb.NullString(err.Error())
	}
	if _, ferr := finishRunSQL.Exec(context.WithoutCancel(ctx), rc.db, p); ferr != nil {
		err = errors.Join(err, fmt.Errorf("reconcile: record the run's end: %w", ferr))
	}
	if err != nil {
		return res, fmt.Errorf("reconcile run %d: %w", res.RunID, err)
	}
	return res, nil
}

// reconcileRun is the state of one run.
type reconcileRun struct {
	rc    *Reconciler
	actor string
	res   Result
	seen  map[string]bool // ids of the succeeded charges met
	owed  []int64         // compensations met, to drive
}

func (r *reconcileRun) walk(ctx context.Context, since, until time.Time) error {
	q := psp.ChargeListQuery{Since: since, Until: until, Limit: r.rc.cfg.PageSize}
	for {
		pctx, cancel := context.WithTimeout(ctx, r.rc.cfg.ProviderTimeout)
		page, err := r.rc.provider.ListCharges(pctx, q)
		cancel()
		if err != nil {
			return fmt.Errorf("list the provider's charges: %w", err)
		}
		for _, ch := range page.Charges {
			if ch.Status == psp.StatusCanceled {
				continue // a fenced key: nothing was charged
			}
			r.res.ChargesSeen++
			if err := r.charge(ctx, ch); err != nil {
				return fmt.Errorf("charge %s: %w", ch.ID, err)
			}
		}
		if page.Next == "" {
			return nil
		}
		q.After = page.Next
	}
}

// charge decides one charge of the window.
func (r *reconcileRun) charge(ctx context.Context, ch psp.Charge) error {
	if ch.Status == psp.StatusSucceeded {
		r.seen[ch.ID] = true
	}
	var p chargePayment
	err := sqlx.GetContext(ctx, r.rc.db, &p, chargePaymentSQL, ch.ID, ch.Key)
	switch {
	case err == nil && ch.Status == psp.StatusSucceeded && p.ChargeID != ch.ID:
		// Another charge under the key of a payment that names its own: a provider without
		// keys, or past its key window, made the order's charge twice. The payment keeps the
		// first; this one is owed back as an orphan of the order.
		owner, why, err := r.owner(ctx, ch)
		if err != nil {
			return err
		}
		return r.orphan(ctx, ch, owner, fmt.Sprintf("a second charge under the key of order %d's payment, which is charge %s (%s)",
			p.OrderID, p.ChargeID, cmp.Or(why, "its order is charged")))
	case err == nil:
		return r.checkAmounts(ctx, ch, p)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("find its payment: %w", err)
	case ch.Status != psp.StatusSucceeded:
		return nil // a decline with no payment holds no money
	}
	owner, why, err := r.owner(ctx, ch)
	if err != nil {
		return err
	}
	if why == "" {
		r.res.Pending++
		return nil
	}
	return r.orphan(ctx, ch, owner, why)
}

// owner finds the order ch was made for. why is "" when that order can still complete
// with ch (a pending order, charged under its own key), and otherwise says why ch belongs to
// no completable order. own is set when ch was made under the order's own key: the
// compensation then belongs to the order, as a cancel's does.
func (r *reconcileRun) owner(ctx context.Context, ch psp.Charge) (o ownerOrder, why string, err error) {
	ref, ok := checkout.OrderOfDescription(ch.Description)
	if !ok {
		return o, "the charge names no order of tekrar's", nil
	}
	id, found, err := checkout.FindChargeOrder(ctx, r.rc.db, ch.Description, ch.Key)
	switch {
	case err != nil:
		return o, "", err
	case !found && ref.PublicID != "":
		return o, fmt.Sprintf("the charge names order %s, which tekrar does not have", ref.PublicID), nil
	case !found:
		// An internal id from before descriptions named public ids, which no order made
		// under the charge's key holds now: after a failover or a restore it may be
		// another order's, which must not be charged with this one (docs/recovery.md).
		return o, "the charge names an order by an internal id that no order of its key holds", nil
	}
	var row chargeOrder
	err = sqlx.GetContext(ctx, r.rc.db, &row, chargeOrderSQL, id)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Sprintf("the charge names order %s, which tekrar does not have", ch.Description[len("order "):]), nil
	}
	if err != nil {
		return o, "", fmt.Errorf("read order %d: %w", id, err)
	}
	o.order = &row
	if row.KeyID.Valid {
		k := checkout.Key{ID: row.KeyID.Int64, ClientID: row.KeyClientID.Int64, Key: row.Key.String, CreatedAt: row.KeyCreatedAt.Time,
			Intent: row.KeyIntent}
		o.own = checkout.ChargeKey(&k) == ch.Key
	}
	switch {
	case !o.own:
		return o, fmt.Sprintf("the charge names order %s but was not made under its key", row.PublicID), nil
	case checkout.PendingStatuses.Has(row.Status):
		return o, "", nil
	default:
		return o, fmt.Sprintf("order %s is %s and cannot complete with the charge", row.PublicID, row.Status), nil
	}
}

// ownerOrder is the order a charge names, if tekrar has it.
type ownerOrder struct {
	order *chargeOrder
	own   bool // the charge was made under the order's own provider key
}

// orphan records ch as a charge of no completable order and owes its refund.
func (r *reconcileRun) orphan(ctx context.Context, ch psp.Charge, o ownerOrder, why string) error {
	r.res.Orphans++
	now := r.rc.cfg.Now()
	f := finding{Kind: "orphan_charge", ChargeID: ch.ID, ChargeKey: tdb.NullString(ch.Key),
		ProviderAmount: sql.NullInt64{Int64: ch.Amount, Valid: true}, ProviderCurrency: tdb.NullString(ch.Currency),
		Detail: why, RunID: r.res.RunID, Now: now}
	p := orphanCompensation{ChargeKey: ch.Key, ChargeID: ch.ID, Reason: "reconciliation: " + why,
		Now: now, WatchUntil: now.Add(r.rc.cfg.ProviderHorizon), Actor: r.actor, Target: "charge:" + ch.ID}
	if o.order != nil {
		f.OrderID = sql.NullInt64{Int64: o.order.ID, Valid: true}
		f.OrderAmount, f.OrderCurrency = sql.NullInt64{Int64: o.order.Amount, Valid: true}, tdb.NullString(o.order.Currency)
		if o.own {
			// The order's own debt, as its cancel writes it: shown on the order's page.
			p.OrderID = f.OrderID
			p.ClientID = sql.NullInt64{Int64: o.order.ClientID, Valid: true}
		}
	}
	detail, err := json.Marshal(map[string]any{"charge_id": ch.ID, "amount": ch.Amount, "currency": ch.Currency,
		"reason": why, "run_id": r.res.RunID, "order_id": p.OrderID.Int64})
	if err != nil {
		return fmt.Errorf("audit detail: %w", err)
	}
	p.Detail = string(detail)
	err = tdb.InTx(ctx, r.rc.db, "owe the refund of an orphan charge", func(tx *sqlx.Tx) error {
		if _, err := recordFindingSQL.Exec(ctx, tx, f); err != nil {
			return fmt.Errorf("record finding: %w", err)
		}
		var c struct {
			ID       int64 `db:"id"`
			Inserted bool  `db:"inserted"`
		}
		err := oweOrphanSQL.Get(ctx, tx, &c, p)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // refunded already
		case err != nil:
			return fmt.Errorf("owe its refund: %w", err)
		}
		if c.Inserted {
			r.res.CompensationsCreated++
			r.rc.logger.Warn("reconcile: a charge of no completable order: refund owed",
				"charge_id", ch.ID, "amount", ch.Amount, "currency", ch.Currency, "reason", why)
		}
		r.owed = append(r.owed, c.ID)
		return nil
	})
	if err != nil {
		return err
	}
	r.rc.cfg.Crash(checkout.CrashReconcileAfterOrphan)
	return nil
}

// checkAmounts compares a charge recorded on a payment with the payment and its order.
func (r *reconcileRun) checkAmounts(ctx context.Context, ch psp.Charge, p chargePayment) error {
	if ch.Amount == p.Amount && ch.Currency == p.Currency && ch.Amount == p.OrderAmount && ch.Currency == p.OrderCurrency {
		return nil
	}
	r.res.Mismatches++
	detail := fmt.Sprintf("the provider charged %d %s; tekrar's payment says %d %s and its order %d %s",
		ch.Amount, ch.Currency, p.Amount, p.Currency, p.OrderAmount, p.OrderCurrency)
	_, err := recordFindingSQL.Exec(ctx, r.rc.db, finding{Kind: "amount_mismatch", ChargeID: ch.ID, ChargeKey: tdb.NullString(ch.Key),
		OrderID:        sql.NullInt64{Int64: p.OrderID, Valid: true},
		ProviderAmount: sql.NullInt64{Int64: ch.Amount, Valid: true}, ProviderCurrency: tdb.NullString(ch.Currency),
		OrderAmount: sql.NullInt64{Int64: p.OrderAmount, Valid: true}, OrderCurrency: tdb.NullString(p.OrderCurrency),
		Detail: detail, RunID: r.res.RunID, Now: r.rc.cfg.Now()})
	if err != nil {
		return fmt.Errorf("record amount mismatch: %w", err)
	}
	r.rc.logger.Warn("reconcile: amount mismatch", "charge_id", ch.ID, "order_id", p.OrderID, "detail", detail)
	return nil
}

// paidWithoutCharge looks for orders of the window recorded paid whose charge the walk did
// not meet. The windows differ (an order is created before its charge), so each is looked
// up at the provider before it counts: only a charge the provider does not have, or does
// not have as succeeded, is a finding.
func (r *reconcileRun) paidWithoutCharge(ctx context.Context, since, until time.Time) error {
	var after int64
	for {
		var page []paidOrder
		if err := sqlx.SelectContext(ctx, r.rc.db, &page, paidOrdersSQL, since, until, after, r.rc.cfg.PageSize); err != nil {
			return fmt.Errorf("list paid orders: %w", err)
		}
		for _, o := range page {
			after = o.OrderID
			if r.seen[o.ChargeID] {
				continue
			}
			if err := r.lookUpPaid(ctx, o); err != nil {
				return fmt.Errorf("order %d: %w", o.OrderID, err)
			}
		}
		if len(page) < r.rc.cfg.PageSize {
			return nil
		}
	}
}

func (r *reconcileRun) lookUpPaid(ctx context.Context, o paidOrder) error {
	pctx, cancel := context.WithTimeout(ctx, r.rc.cfg.ProviderTimeout)
	defer cancel()
	// The payment's charge, found the way the provider can: under its key (the key's charge,
	// compared below), or by its order's reference or in a listing, where only the charge
	// the payment names matches.
	found, err := checkout.FindCharge(pctx, r.rc.provider, psp.PromisesOf(r.rc.provider), checkout.ChargeRef{
		Key: o.ChargeKey, Reference: checkout.OrderReference(o.PublicID), Since: o.Created,
		ChargeID: o.ChargeID}, r.rc.cfg.Now())
	ch := found.Charge
	var detail string
	switch {
	case psp.NoChargeYet(err):
		detail = "the provider has no charge under the payment's key"
	case err != nil:
		return fmt.Errorf("look up its charge: %w", err)
	case ch.Status == psp.StatusSucceeded && ch.ID == o.ChargeID:
		return nil // outside the window, but there
	case ch.Status == psp.StatusSucceeded:
		detail = fmt.Sprintf("the payment names charge %s; the provider's charge under its key is %s", o.ChargeID, ch.ID)
	default:
		detail = "the provider's charge under the payment's key is " + ch.Status
	}
	r.res.PaidWithoutCharge++
	_, err = recordFindingSQL.Exec(ctx, r.rc.db, finding{Kind: "paid_without_charge", ChargeID: o.ChargeID,
		ChargeKey: tdb.NullString(o.ChargeKey), OrderID: sql.NullInt64{Int64: o.OrderID, Valid: true},
		OrderAmount: sql.NullInt64{Int64: o.Amount, Valid: true}, OrderCurrency: tdb.NullString(o.Currency),
		Detail: detail, RunID: r.res.RunID, Now: r.rc.cfg.Now()})
	if err != nil {
		return fmt.Errorf("record paid without charge: %w", err)
	}
	r.rc.logger.Warn("reconcile: an order is paid with no charge at the provider", "order_id", o.OrderID, "detail", detail)
	return nil
}

// drive makes the refunds of the compensations the run met (DriveCompensations).
func (r *reconcileRun) drive(ctx context.Context) error {
	refunded, err := r.rc.svc.DriveCompensations(ctx, r.owed)
	r.res.RefundsMade = refunded
	return err
}
