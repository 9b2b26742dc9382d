package admin

// The answer to "was my installment charged twice?", in words, from the charges the
// provider's ledger holds under each installment's keys (report.OrderPlan): an installment
// is one purchase's share, and more than one charge for it is a double charge whatever the
// rows of the plan say (they record one charge each).

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// extraCharges are the charges of in beyond the one its row records (all of them when the
// row records none: a canceled installment's charges belong to no installment).
func extraCharges(in report.PlanInstallment) []report.InstallmentCharge {
	var out []report.InstallmentCharge
	kept := false
	for _, c := range in.Charges {
		if c.Recorded && !kept {
			kept = true
			continue
		}
		out = append(out, c)
	}
	if !kept && len(out) > 0 && in.Status == "paid" {
		out = out[1:] // the row names no charge the ledger has: keep the oldest as its own
	}
	return out
}

// chargeRefunded says whether the money of an extra charge went back: tekrar's compensation
// refunded it, or the provider holds it refunded in full.
func chargeRefunded(c report.InstallmentCharge) bool {
	return c.Compensation == "refunded" || c.Compensation == "already_refunded" || (c.Amount > 0 && c.Refunded >= c.Amount)
}

// timesWord is how many times, as a sentence says it: "once", "twice", "3 times".
func timesWord(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return strconv.Itoa(n) + " times"
}

// installmentWords is what happened to one installment: "charged once", "charged twice:
// 2 charges for installment 2, a refund is owed", "not charged yet".
func installmentWords(in report.PlanInstallment) string {
	n := len(in.Charges)
	switch {
	case n == 0 && in.Status == "canceled":
		return "canceled, never charged"
	case n == 0:
		return "not charged yet"
	case n == 1 && in.Status != "canceled":
		return "charged once"
	}
	extra := extraCharges(in)
	refund := "a refund is owed"
	made := 0
	for _, c := range extra {
		if chargeRefunded(c) {
			made++
		}
	}
	switch {
	case made == len(extra):
		refund = "a refund was made"
	case made > 0:
		refund = fmt.Sprintf("a refund was made of %d and is owed of %d", made, len(extra)-made)
	}
	if in.Status == "canceled" {
		return fmt.Sprintf("canceled, yet charged %s: %d %s for installment %d, %s",
			timesWord(n), n, map[bool]string{true: "charge", false: "charges"}[n == 1], in.N, refund)
	}
	return fmt.Sprintf("charged %s: %d charges for installment %d, %s", timesWord(n), n, in.N, refund)
}

// twice reports whether an installment was charged more than it should have been.
func twice(in report.PlanInstallment) bool {
	return len(in.Charges) > 1 || (len(in.Charges) == 1 && in.Status == "canceled")
}

// planVerdict answers "was my installment charged twice?" for an order's plan, and lays
// its installments out for the page (dates in the client's zone).
func planVerdict(p report.Plan, currency string) (views.Verdict, []views.InstallmentLine) {
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil || p.TimeZone == "" {
		loc = time.UTC
	}
	var v views.Verdict
	var lines []views.InstallmentLine
	var doubled []string
	charged, waiting := 0, 0
	for _, in := range p.Installments {
		format := money.Format(in.Amount, currency)
		l := views.InstallmentLine{N: strconv.Itoa(in.N), Amount: format, DueOn: in.DueOn, Status: in.Status,
			Attempts: strconv.Itoa(in.Attempts), Decline: in.DeclineCode, ChargeID: in.ChargeID, Next: in.NextAttempt, Paid: in.PaidAt}
		if in.PaidAt != nil {
			l.PaidOn = in.PaidAt.In(loc).Format(time.DateOnly)
		}
		extra := extraCharges(in)
		var ids []string
		for _, c := range in.Charges {
			pc := views.PlanCharge{ID: c.ChargeID}
			isExtra := false
			for _, x := range extra {
				isExtra = isExtra || x.ChargeID == c.ChargeID
			}
			switch {
			case isExtra && chargeRefunded(c) && c.RefundID != "":
				pc.Note = "extra charge, refunded (" + c.RefundID + ")"
			case isExtra && chargeRefunded(c):
				pc.Note = "extra charge, refunded"
			case isExtra:
				pc.Note = "extra charge, a refund is owed"
			}
			if c.Attempt > 0 && in.N > 1 {
				pc.Note = strings.TrimPrefix(pc.Note+"; attempt "+strconv.Itoa(c.Attempt), "; ")
			}
			l.Charges = append(l.Charges, pc)
			ids = append(ids, c.ChargeID)
		}
		lines = append(lines, l)
		words := installmentWords(in)
		fact := fmt.Sprintf("Installment %d (%s, due %s): %s", in.N, format, in.DueOn, words)
		if len(ids) > 0 {
			fact += " (" + strings.Join(ids, ", ") + ")"
		}
		if l.PaidOn != "" {
			fact += ", paid " + l.PaidOn
		}
		if len(in.Charges) == 0 && in.Status != "canceled" {
			fact += fmt.Sprintf(" (%s, %s)", in.Status, plural(in.Attempts, "attempt", "attempts"))
		}
		v.Facts = append(v.Facts, fact+".")
		switch {
		case twice(in):
			doubled = append(doubled, fmt.Sprintf("Installment %d was %s", in.N, words))
		case len(in.Charges) == 1:
			charged++
		case in.Status != "canceled":
			waiting++
		}
	}
	n := len(p.Installments)
	if len(doubled) > 0 {
		v.Kind = verdictTwice
		v.Headline = strings.Join(doubled, "; ") + "."
		owed := false
		for _, in := range p.Installments {
			for _, c := range extraCharges(in) {
				owed = owed || (twice(in) && !chargeRefunded(c))
			}
		}
		if owed {
			v.Advice = append(v.Advice, "The extra charge belongs to no installment: reconciliation refunds it as an orphan charge, and the Compensations page lists that refund. Tell the customer the extra charge will be refunded; do not refund the order itself, whose refunds come from its first installment's charge.")
		} else {
			v.Advice = append(v.Advice, "Tell the customer the extra charge was refunded (the refund ids are above); nothing more is owed.")
		}
		return v, lines
	}
	v.Kind = verdictOnce
	v.Headline = fmt.Sprintf("No installment was charged twice: %d of %d installments charged once each, %d not charged yet.", charged, n, waiting)
	v.Advice = append(v.Advice, "The customer sees one charge per paid installment: that is the plan, not a double charge.")
	return v, lines
}
