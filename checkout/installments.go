package checkout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

// Installment plans (docs/installments.md).
//
// An order may be paid in 2 to 12 installments on a card the customer saved at the provider.
// Its amount is the total; the installments split it in integer minor units, the remainder
// of the division on the first. The first is charged with the order, under the order's own
// provider key; each later one on its due date by package installments, the job a scheduler
// runs.
//
// An installment is one row of installments, keyed by (order_id, n). Each attempt to charge
// it has a number, and its provider key is derived from the order's intent (or, for an order
// claimed before there was one, the order), n and that number (InstallmentKey): whoever charges attempt a of installment n — two replicas at once, a
// rerun after a kill, a process that froze and woke — asks the provider under the same key,
// and the provider charges at most once per key. The row is claimed with a lease (FOR UPDATE
// SKIP LOCKED, then a lease token) and the outcome is recorded fenced by that token, so a
// process whose lease was taken over writes nothing.

// Bounds of an installment plan.
const (
	MinInstallments = 2
	MaxInstallments = 12
)

// splitAmount divides total into count installments of whole minor units: each total/count,
// the remainder of the division added to the first (1000 in 3: 334, 333, 333).
func splitAmount(total int64, count int) []int64 {
	out := make([]int64, count)
	base, rem := total/int64(count), total%int64(count)
	for i := range out {
		out[i] = base
	}
	out[0] += rem
	return out
}

// plannedInstallment is an installment as an order's claim creates it.
type plannedInstallment struct {
	N      int
	Amount int64
	DueOn  calendar.Day
	DueAt  time.Time // when DueOn starts in the client's zone
}

// planInstallments is the schedule of an order created at created by a client in loc:
// installment n is due n-1 months after the order's day there.
func planInstallments(total int64, count int, created time.Time, loc *time.Location) []plannedInstallment {
	amounts := splitAmount(total, count)
	day := calendar.Of(created, loc)
	out := make([]plannedInstallment, count)
	for i := range out {
		due := day.AddMonths(i)
		out[i] = plannedInstallment{N: i + 1, Amount: amounts[i], DueOn: due, DueAt: due.Start(loc)}
	}
	return out
}

// InstallmentKey is the provider key of attempt a of installment n of an order: stable for
// the three (a rerun, a second replica, a woken process all send the same), and never the
// same for two attempts, since a declined charge is final under its key. An order claimed
// with an intent (orders.intent, its key row's) derives it from that intent, as providerKey
// does, and from nothing of the order's row: an order whose rows were lost and claimed again
// by the client's retry charges its installments under the first order's keys, and meets
// the charges already made. An order claimed before keeps the old derivation, from its id
// and creation time (so that an order id reused after a database restore cannot meet an old
// charge).
func InstallmentKey(orderID int64, orderCreated time.Time, intent []byte, n, attempt int) string {
	h := sha256.New()
	if intent != nil {
		fmt.Fprintf(h, "installment\x00intent\x00%x\x00%d\x00%d", intent, n, attempt)
	} else {
		fmt.Fprintf(h, "installment\x00%d\x00%d\x00%d\x00%d", orderID, orderCreated.UnixMicro(), n, attempt)
	}
	return "tekrar_in_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// InstallmentDescription names the order, by its public id as chargeDescription does, and
// the installment a charge is for ("order ord_… installment 2"). It does not read as
// chargeDescription, so provider events about it do not settle the order; reconciliation
// knows it by its key.
func InstallmentDescription(publicID string, n int) string {
	return fmt.Sprintf("order %s installment %d", publicID, n)
}

// InstallmentView is an installment as the API shows it.
type InstallmentView struct {
	N      int    `json:"n"`
	Amount int64  `json:"amount"`
	DueOn  string `json:"due_on"` // YYYY-MM-DD, in the client's time zone
	// Status: scheduled, paid, attention (declined on every retry; an operator's) or
	// canceled (the order was refunded or declined first).
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	NextAttempt *time.Time `json:"next_attempt_at,omitempty"`
	DeclineCode string     `json:"decline_code,omitempty"` // of the last declined attempt
	PaidAt      *time.Time `json:"paid_at,omitempty"`
	ChargeID    string     `json:"charge_id,omitempty"` // the provider's charge that paid it
}

func (r installmentRow) view() InstallmentView {
	v := InstallmentView{N: r.N, Amount: r.Amount, DueOn: r.DueOn.Format(time.DateOnly), Status: r.Status,
		Attempts: r.Attempts, DeclineCode: r.DeclineCode.String, ChargeID: r.ChargeID.String}
	if r.NextAttempt.Valid {
		t := r.NextAttempt.Time.UTC()
		v.NextAttempt = &t
	}
	if r.PaidAt.Valid {
		t := r.PaidAt.Time.UTC()
		v.PaidAt = &t
	}
	return v
}

// withInstallments reads the plan of order id into v, if it has one.
func (s *Service) withInstallments(ctx context.Context, v *OrderView, id int64) error {
	if v.plan <= 1 {
		return nil
	}
	rows, err := loadInstallments(ctx, s.db, id)
	if err != nil {
		return err
	}
	v.Installments = make([]InstallmentView, len(rows))
	for i, r := range rows {
		v.Installments[i] = r.view()
	}
	return nil
}

// settleFirstInstallment shows in v what the order's charge ch does to its plan, as
// completeOrderSQL writes it: the first installment paid, or every one canceled.
func (v *OrderView) settleFirstInstallment(ch psp.Charge, now time.Time) {
	for i := range v.Installments {
		in := &v.Installments[i]
		switch {
		case ch.Status == psp.StatusSucceeded && in.N == 1:
			in.Status, in.Attempts, in.NextAttempt = "paid", 1, nil
			t := now.UTC()
			in.PaidAt = &t
		case ch.Status != psp.StatusSucceeded:
			in.Status, in.NextAttempt = "canceled", nil
			if in.N == 1 {
				in.Attempts, in.DeclineCode = 1, ch.DeclineCode
			}
		}
	}
}

// Problems of refunds of an order paid in installments, raised before anything is stored.
var (
	errInstallmentInFlight = func() *problem.Problem {
		return problem.Of(problem.CodeInstallmentInFlight).
			WithDetail("an installment of this order is being charged right now; send the refund again in a moment").Advised()
	}
	errExceedsFirstInstallment = func() *problem.Problem {
		return problem.Of(problem.CodeRefundExceedsFirstInstallment).
			WithDetail("an order paid in installments is refunded from its first installment's charge; its refunds cannot exceed it").Advised()
	}
)
