package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout/psp"
)

// Reconciliation.
//
// tekrar's orders and the provider's ledger can disagree in ways no single request sees: a
// charge made under a key tekrar gave up on, a charge made at the provider by hand, a
// charge whose amount is not its order's, an order recorded paid whose charge the provider
// does not have. A run walks the provider's charges of a window (ListCharges, page by page)
// against tekrar's orders:
//
//   - a charge recorded on a payment: fine, unless its amount or currency differs from the
//     payment's or the order's (finding amount_mismatch);
//   - a succeeded charge of a pending order made under that order's own key: fine, the
//     order can still complete with it (its worker, a retry or the completer will);
//   - any other succeeded charge belongs to no order that can complete with it (no order,
//     an order canceled or declined, or one made under another key): finding orphan_charge,
//     and a compensation that refunds it in full. The compensation is keyed by the charge
//     key, so however many runs meet the charge, concurrently or again after a kill, one
//     row is written and one refund is made (under compensationRefundKey, derived from the
//     charge key). It is audited by the statement that writes it;
//   - an order of the window recorded paid whose charge the walk did not meet, and the
//     provider confirms it does not have as succeeded: finding paid_without_charge.
//
// The run then drives the compensations it met, as the completer does, so that a run by
// hand finishes the job; whatever it leaves (a kill, a provider down) the completer of
// every serve process drives later. Findings are keyed by (kind, charge): a rerun adds
// no row.

// ReconcileOptions say how a run is recorded.
type ReconcileOptions struct {
	// Scheduled: serve's schedule started the run, not an operator.
	Scheduled bool
	// PageSize is how many charges are asked for at once; 0 means psp.MaxListLimit.
	PageSize int
}

// ReconcileResult counts what a run found and did.
type ReconcileResult struct {
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
func (r ReconcileResult) String() string {
	return fmt.Sprintf("run %d: %d charges, %d pending, %d orphans (%d compensations created, %d refunds made), %d mismatches, %d paid without charge",
		r.RunID, r.ChargesSeen, r.Pending, r.Orphans, r.CompensationsCreated, r.RefundsMade, r.Mismatches, r.PaidWithoutCharge)
}

// processName names this process in the runs it records and the audit entries it writes.
func processName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// Reconcile runs one reconciliation of the charges created in [since, until).
func (s *Service) Reconcile(ctx context.Context, since, until time.Time, opts ReconcileOptions) (ReconcileResult, error) {
	if !since.Before(until) {
		return ReconcileResult{}, fmt.Errorf("reconcile: the window's start %s is not before its end %s",
			since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if opts.PageSize <= 0 || opts.PageSize > psp.MaxListLimit {
		opts.PageSize = psp.MaxListLimit
	}
	r := &reconcileRun{s: s, opts: opts, actor: "reconcile@" + processName(), seen: map[string]bool{}}
	if err := s.db.GetContext(ctx, &r.res.RunID, startRunSQL, processName(), opts.Scheduled, since, until, s.cfg.Now()); err != nil {
		return ReconcileResult{}, fmt.Errorf("reconcile: record the run: %w", err)
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
	p := runFinish{ID: res.RunID, Now: s.cfg.Now(), Seen: res.ChargesSeen, Orphans: res.Orphans,
		Created: res.CompensationsCreated, Refunds: res.RefundsMade, Mismatch: res.Mismatches, Unpaid: res.PaidWithoutCharge}
	if err != nil {
		p.Error = nullString(err.Error())
	}
	if _, ferr := finishRunSQL.exec(context.WithoutCancel(ctx), s.db, p); ferr != nil {
		err = errors.Join(err, fmt.Errorf("reconcile: record the run's end: %w", ferr))
	}
	if err != nil {
		return res, fmt.Errorf("reconcile run %d: %w", res.RunID, err)
	}
	return res, nil
}

// reconcileRun is the state of one run.
type reconcileRun struct {
	s     *Service
	opts  ReconcileOptions
	actor string
	res   ReconcileResult
	seen  map[string]bool // ids of the succeeded charges met
	owed  []int64         // compensations met, to drive
}

func (r *reconcileRun) walk(ctx context.Context, since, until time.Time) error {
	q := psp.ChargeListQuery{Since: since, Until: until, Limit: r.opts.PageSize}
	for {
		pctx, cancel := context.WithTimeout(ctx, r.s.cfg.ProviderTimeout)
		page, err := r.s.provider.ListCharges(pctx, q)
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
	err := sqlx.GetContext(ctx, r.s.db, &p, chargePaymentSQL, ch.ID, ch.Key)
	switch {
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
	id, ok := OrderOfDescription(ch.Description)
	if !ok {
		return o, "the charge names no order of tekrar's", nil
	}
	var row chargeOrder
	err = sqlx.GetContext(ctx, r.s.db, &row, chargeOrderSQL, id)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Sprintf("the charge names order %d, which tekrar does not have", id), nil
	}
	if err != nil {
		return o, "", fmt.Errorf("read order %d: %w", id, err)
	}
	o.order = &row
	if row.KeyID.Valid {
		k := Key{ID: row.KeyID.Int64, ClientID: row.KeyClientID.Int64, Key: row.Key.String, CreatedAt: row.KeyCreatedAt.Time,
			Intent: row.KeyIntent}
		o.own = providerKey("charge", &k) == ch.Key
	}
	switch {
	case !o.own:
		return o, fmt.Sprintf("the charge names order %d but was not made under its key", id), nil
	case PendingStatuses.Has(row.Status):
		return o, "", nil
	default:
		return o, fmt.Sprintf("order %d is %s and cannot complete with the charge", id, row.Status), nil
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
	now := r.s.cfg.Now()
	f := finding{Kind: "orphan_charge", ChargeID: ch.ID, ChargeKey: nullString(ch.Key),
		ProviderAmount: sql.NullInt64{Int64: ch.Amount, Valid: true}, ProviderCurrency: nullString(ch.Currency),
		Detail: why, RunID: r.res.RunID, Now: now}
	p := orphanCompensation{ChargeKey: ch.Key, ChargeID: ch.ID, Reason: "reconciliation: " + why,
		Now: now, WatchUntil: now.Add(r.s.cfg.ProviderHorizon), Actor: r.actor, Target: "charge:" + ch.ID}
	if o.order != nil {
		f.OrderID = sql.NullInt64{Int64: o.order.ID, Valid: true}
		f.OrderAmount, f.OrderCurrency = sql.NullInt64{Int64: o.order.Amount, Valid: true}, nullString(o.order.Currency)
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
	err = inTx(ctx, r.s.db, "owe the refund of an orphan charge", func(tx *sqlx.Tx) error {
		if _, err := recordFindingSQL.exec(ctx, tx, f); err != nil {
			return fmt.Errorf("record finding: %w", err)
		}
		var c struct {
			ID       int64 `db:"id"`
			Inserted bool  `db:"inserted"`
		}
		err := oweOrphanSQL.get(ctx, tx, &c, p)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // refunded already
		case err != nil:
			return fmt.Errorf("owe its refund: %w", err)
		}
		if c.Inserted {
			r.res.CompensationsCreated++
			r.s.logger.Warn("reconcile: a charge of no completable order: refund owed",
				"charge_id", ch.ID, "amount", ch.Amount, "currency", ch.Currency, "reason", why)
		}
		r.owed = append(r.owed, c.ID)
		return nil
	})
	if err != nil {
		return err
	}
	r.s.crash(CrashReconcileAfterOrphan)
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
	_, err := recordFindingSQL.exec(ctx, r.s.db, finding{Kind: "amount_mismatch", ChargeID: ch.ID, ChargeKey: nullString(ch.Key),
		OrderID:        sql.NullInt64{Int64: p.OrderID, Valid: true},
		ProviderAmount: sql.NullInt64{Int64: ch.Amount, Valid: true}, ProviderCurrency: nullString(ch.Currency),
		OrderAmount: sql.NullInt64{Int64: p.OrderAmount, Valid: true}, OrderCurrency: nullString(p.OrderCurrency),
		Detail: detail, RunID: r.res.RunID, Now: r.s.cfg.Now()})
	if err != nil {
		return fmt.Errorf("record amount mismatch: %w", err)
	}
	r.s.logger.Warn("reconcile: amount mismatch", "charge_id", ch.ID, "order_id", p.OrderID, "detail", detail)
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
		if err := sqlx.SelectContext(ctx, r.s.db, &page, paidOrdersSQL, since, until, after, r.opts.PageSize); err != nil {
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
		if len(page) < r.opts.PageSize {
			return nil
		}
	}
}

func (r *reconcileRun) lookUpPaid(ctx context.Context, o paidOrder) error {
	pctx, cancel := context.WithTimeout(ctx, r.s.cfg.ProviderTimeout)
	defer cancel()
	ch, err := r.s.provider.LookupCharge(pctx, o.ChargeKey)
	var detail string
	switch {
	case answerOf(opLookupCharge, err).Verdict == verdictNone:
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
	_, err = recordFindingSQL.exec(ctx, r.s.db, finding{Kind: "paid_without_charge", ChargeID: o.ChargeID,
		ChargeKey: nullString(o.ChargeKey), OrderID: sql.NullInt64{Int64: o.OrderID, Valid: true},
		OrderAmount: sql.NullInt64{Int64: o.Amount, Valid: true}, OrderCurrency: nullString(o.Currency),
		Detail: detail, RunID: r.res.RunID, Now: r.s.cfg.Now()})
	if err != nil {
		return fmt.Errorf("record paid without charge: %w", err)
	}
	r.s.logger.Warn("reconcile: an order is paid with no charge at the provider", "order_id", o.OrderID, "detail", detail)
	return nil
}

// drive makes the refunds of the compensations the run met, each taken as the completer
// takes one, so that a run, a concurrent run and every completer may try the same debt
// and the provider still refunds once.
func (r *reconcileRun) drive(ctx context.Context) error {
	if len(r.owed) == 0 {
		return nil
	}
	now := r.s.cfg.Now()
	var due []compensation
	if err := sqlx.SelectContext(ctx, r.s.db, &due, takeCompensationsSQL, now, now.Add(r.s.cfg.Lease), pq.Array(r.owed)); err != nil {
		return fmt.Errorf("take the compensations met: %w", err)
	}
	var pass compensationPass
	var errs []error
	for _, c := range due {
		if err := r.s.driveCompensation(ctx, c, now, &pass); err != nil {
			errs = append(errs, fmt.Errorf("compensation %d: %w", c.ID, err))
		}
	}
	r.res.RefundsMade = pass.Refunded
	return errors.Join(errs...)
}
