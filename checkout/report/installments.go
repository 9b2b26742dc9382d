package report

// The plan of an order paid in installments, with what the provider charged for each
// installment: the read behind "was my installment charged twice?". tekrar records one
// charge per installment (installments.provider_charge_id, the first's on payments), so a
// second charge of one installment is never on its row: it is in the provider's ledger,
// under a key of the installment (an attempt whose answer was lost and then charged again
// under the next attempt's key, a charge made after the plan was canceled). The ledger as
// tekrar holds it is provider_charges (the provider's events, checkout/inbox) and, with the
// sandbox provider, psp_charges; both are read by their key index.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
)

// PlanInstallment is one installment of an order's plan and the charges made for it.
type PlanInstallment struct {
	N           int
	Amount      int64
	DueOn       string // YYYY-MM-DD, a day in the client's zone
	Status      string // scheduled, paid, attention or canceled
	Attempts    int
	InFlight    bool
	NextAttempt *time.Time
	DeclineCode string
	PaidAt      *time.Time
	ChargeID    string // the charge recorded on the row; "" until paid
	// Charges are the succeeded charges of the installment, oldest first: the recorded one
	// and any the provider's ledger holds under one of the installment's keys. More than one
	// is the installment charged twice.
	Charges []InstallmentCharge
}

// InstallmentCharge is one succeeded charge of an installment at the provider.
type InstallmentCharge struct {
	ChargeID string
	Key      string // the provider key it was made under; "" when known only by its id
	Attempt  int    // the attempt whose key it was made under; 0 when not known
	Amount   int64
	Refunded int64     // what the provider has refunded of it
	At       time.Time // when the ledger recorded it; zero when known only from the row
	Recorded bool      // it is the charge the installment's row names
	// Compensation is the state of the refund tekrar owes for it (watching, refunded, ...),
	// when reconciliation found it belongs to no installment; "" when none is owed.
	Compensation string
	RefundID     string // the refund that compensation made
}

// Plan is an order's installment plan, first to last, in its client's time zone.
type Plan struct {
	TimeZone     string // the client's IANA zone: due dates are its days
	Installments []PlanInstallment
}

const planOrderSQL = `
	SELECT o.id, o.created_at, o.intent, c.time_zone,
	       coalesce(p.provider_key, '') AS payment_key, coalesce(p.provider_charge_id, '') AS payment_charge
	  FROM orders o JOIN clients c ON c.id = o.client_id
	  LEFT JOIN payments p ON p.order_id = o.id
	 WHERE o.id = $1`

const planRowsSQL = `
	SELECT n, amount, to_char(due_on, 'YYYY-MM-DD') AS due_on, status, attempts, in_flight, next_attempt_at,
	       decline_code, paid_at, provider_charge_id
	  FROM installments WHERE order_id = $1 ORDER BY n`

// planChargesSQL reads the succeeded charges under the keys $1 from the provider's ledger as
// tekrar holds it, and the compensation owed for each, by key.
const planChargesSQL = `
	SELECT c.charge_key, c.charge_id, c.amount, c.refunded, c.at,
	       coalesce(m.state::text, '') AS compensation, coalesce(m.refund_id, '') AS refund_id
	  FROM (SELECT charge_key, charge_id, amount, refunded, updated_at AS at
	          FROM provider_charges WHERE charge_key = ANY ($1::text[]) AND status = 'succeeded'
	        UNION ALL
	        SELECT key, id, amount, refunded_amount, created_at
	          FROM psp_charges WHERE key = ANY ($1::text[]) AND status = 'succeeded') c
	  LEFT JOIN compensations m ON m.charge_key = c.charge_key
	 ORDER BY c.at, c.charge_id`

// OrderPlan returns the plan of order id (its internal id) with each installment's charges;
// an empty Plan for an order paid at once.
func OrderPlan(ctx context.Context, db sqlx.QueryerContext, id int64) (Plan, error) {
	var o struct {
		ID            int64     `db:"id"`
		CreatedAt     time.Time `db:"created_at"`
		Intent        []byte    `db:"intent"`
		TimeZone      string    `db:"time_zone"`
		PaymentKey    string    `db:"payment_key"`
		PaymentCharge string    `db:"payment_charge"`
	}
	switch err := sqlx.GetContext(ctx, db, &o, planOrderSQL, id); {
	case err == sql.ErrNoRows:
		return Plan{}, nil
	case err != nil:
		return Plan{}, fmt.Errorf("plan of order %d: %w", id, err)
	}
	var rows []struct {
		N           int            `db:"n"`
		Amount      int64          `db:"amount"`
		DueOn       string         `db:"due_on"`
		Status      string         `db:"status"`
		Attempts    int            `db:"attempts"`
		InFlight    bool           `db:"in_flight"`
		NextAttempt sql.NullTime   `db:"next_attempt_at"`
		DeclineCode sql.NullString `db:"decline_code"`
		PaidAt      sql.NullTime   `db:"paid_at"`
		ChargeID    sql.NullString `db:"provider_charge_id"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, planRowsSQL, id); err != nil {
		return Plan{}, fmt.Errorf("installments of order %d: %w", id, err)
	}
	p := Plan{TimeZone: o.TimeZone}
	type owner struct{ n, attempt int }
	byKey := map[string]owner{}
	var keys []string
	for _, r := range rows {
		in := PlanInstallment{N: r.N, Amount: r.Amount, DueOn: r.DueOn, Status: r.Status, Attempts: r.Attempts,
			InFlight: r.InFlight, DeclineCode: r.DeclineCode.String, ChargeID: r.ChargeID.String}
		if r.NextAttempt.Valid {
			t := r.NextAttempt.Time.UTC()
			in.NextAttempt = &t
		}
		if r.PaidAt.Valid {
			t := r.PaidAt.Time.UTC()
			in.PaidAt = &t
		}
		if in.N == 1 {
			// The first installment is the order's own charge, under the order's key.
			if in.ChargeID == "" {
				in.ChargeID = o.PaymentCharge
			}
			if o.PaymentKey != "" {
				byKey[o.PaymentKey] = owner{1, 1}
				keys = append(keys, o.PaymentKey)
			}
		} else {
			for a := 1; a <= r.Attempts; a++ {
				k := checkout.InstallmentKey(o.ID, o.CreatedAt, o.Intent, r.N, a)
				byKey[k] = owner{r.N, a}
				keys = append(keys, k)
			}
		}
		if in.ChargeID != "" && in.Status == "paid" {
			in.Charges = append(in.Charges, InstallmentCharge{ChargeID: in.ChargeID, Amount: in.Amount, Recorded: true})
		}
		p.Installments = append(p.Installments, in)
	}
	if len(keys) == 0 || len(p.Installments) == 0 {
		return p, nil
	}
	var ledger []struct {
		Key          string    `db:"charge_key"`
		ChargeID     string    `db:"charge_id"`
		Amount       int64     `db:"amount"`
		Refunded     int64     `db:"refunded"`
		At           time.Time `db:"at"`
		Compensation string    `db:"compensation"`
		RefundID     string    `db:"refund_id"`
	}
	if err := sqlx.SelectContext(ctx, db, &ledger, planChargesSQL, pq.Array(keys)); err != nil {
		return Plan{}, fmt.Errorf("installment charges of order %d: %w", id, err)
	}
	for _, l := range ledger {
		who := byKey[l.Key]
		i := slices.IndexFunc(p.Installments, func(in PlanInstallment) bool { return in.N == who.n })
		if i < 0 {
			continue
		}
		in := &p.Installments[i]
		ch := InstallmentCharge{ChargeID: l.ChargeID, Key: l.Key, Attempt: who.attempt, Amount: l.Amount,
			Refunded: l.Refunded, At: l.At.UTC(), Compensation: l.Compensation, RefundID: l.RefundID}
		// One charge may be in both tables (the sandbox's ledger and its events): keep one,
		// the recorded one's place if it is that.
		if j := slices.IndexFunc(in.Charges, func(c InstallmentCharge) bool { return c.ChargeID == l.ChargeID }); j >= 0 {
			c := &in.Charges[j]
			ch.Recorded = c.Recorded
			if c.Key != "" && c.At.Before(ch.At) { // keep the earliest time the ledger gives
				ch.At = c.At
			}
			ch.Refunded = max(ch.Refunded, c.Refunded)
			*c = ch
			continue
		}
		in.Charges = append(in.Charges, ch)
	}
	for i := range p.Installments {
		slices.SortStableFunc(p.Installments[i].Charges, func(a, b InstallmentCharge) int {
			switch {
			case a.Recorded != b.Recorded && (a.At.IsZero() || b.At.IsZero()):
				if a.Recorded {
					return -1
				}
				return 1
			}
			return a.At.Compare(b.At)
		})
	}
	return p, nil
}
