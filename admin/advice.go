package admin

// The one place the console works out what a customer was charged and what is left to
// refund: the verdict of an order, the pair page and the refund form all take their amounts
// and their words from adviseTap. Each of them had its own sums before, and they disagreed:
// the refund form prefilled a whole refund after a partial one (the customer ended up
// paying 10.00 for a 20.00 purchase), an order in installments was "charged once" for its
// total, and a triple tap was "charged twice".

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
)

// tapOrder is one order as the advice reads it: its price, what the provider charged for
// it (each installment's charge too) and what was refunded of it.
type tapOrder struct {
	PublicID string
	Amount   int64 // the price of the purchase; not what was charged
	Currency string
	Charged  report.OrderCharges
	Refunded int64 // refunded or being refunded
}

func tapOrderOf(o report.OrderRow, c report.OrderCharges) tapOrder {
	return tapOrder{PublicID: o.PublicID, Amount: o.Amount, Currency: o.Currency, Charged: c, Refunded: o.RefundedAmount}
}

// left is what may still be refunded of the order: its charges less its refunds. An order
// in installments is refunded from its first installment's charge only (checkout refuses
// more: refund_exceeds_first_installment), so at most that charge less its refunds.
func (o tapOrder) left() int64 {
	refundable := o.Charged.Total()
	if o.Charged.Installments > 1 {
		refundable = 0
		for _, ch := range o.Charged.Charges {
			if ch.N == 1 {
				refundable = ch.Amount
			}
		}
	}
	return max(refundable-o.Refunded, 0)
}

// refundStep is a refund the advice asks for: amount from order.
type refundStep struct {
	Order  string
	Amount int64
	Full   bool // all that is left of the order
}

// tapAdvice is what adviseTap makes of the orders of one purchase.
type tapAdvice struct {
	orders []tapOrder
	kept   int // the index of the order that stands
	// Times says how many times the purchase was charged, as a sentence ends it: "once",
	// "twice", "3 times" (orders that were charged, each its own payment).
	Times string
	// Charges describes each order's charges, by public id: "charge ch_1 of 45.00 TRY", or
	// an installment plan's charges one by one with what they add up to.
	Charges map[string]string
	// Left is what is left to refund for the customer to have paid the purchase once:
	// negative when more than that was refunded (the purchase itself is refunded).
	Left int64
	// Steps are the refunds that leave the customer paying once, oldest order first.
	Steps []refundStep
	// Stuck is what of Left no refund here can return: charges of later installments, beyond
	// what their orders' first installments can be refunded.
	Stuck int64
	// Advice is what to do, in sentences; Named are the orders it asks to refund, in order.
	Advice []string
	Named  []string
}

// adviseTap works out, from what every order of a suspected double tap (oldest first; a
// single order works too) was charged and refunded, how many times the customer paid and
// what is left to refund. One purchase stands: the customer is to keep paying for one order
// (the oldest of those charged the most so far, whose plan, if it has one, goes on charging
// its later installments), and every other charge is refunded. Refunds already made count
// wherever they were made; the rest comes from the newest other orders first, as much of
// each as can be refunded.
func adviseTap(group []tapOrder) tapAdvice {
	a := tapAdvice{orders: group, Charges: map[string]string{}, kept: -1}
	if len(group) == 0 {
		return a
	}
	var charged, refunded, keep int64
	paid := 0
	for _, o := range group {
		a.Charges[o.PublicID] = chargesText(o)
		total := o.Charged.Total()
		charged += total
		refunded += o.Refunded
		keep = max(keep, total)
		if len(o.Charged.Charges) > 0 {
			paid++
		}
	}
	a.Times = timesText(paid)
	a.Left = charged - refunded - keep
	// The order that stands is the oldest of those charged the most; it is not refunded
	// from, since any refund of an order in installments cancels the rest of its plan.
	a.kept = slices.IndexFunc(group, func(o tapOrder) bool { return o.Charged.Total() == keep })
	rest := a.Left
	for i := len(group) - 1; i >= 0 && rest > 0; i-- {
		if i == a.kept {
			continue
		}
		if n := min(group[i].left(), rest); n > 0 {
			o := group[i]
			a.Steps = append(a.Steps, refundStep{Order: o.PublicID, Amount: n, Full: n == o.left() && n == o.Charged.Total()-o.Refunded})
			rest -= n
		}
	}
	slices.Reverse(a.Steps) // oldest first, as the orders are named everywhere else
	a.Stuck = max(rest, 0)
	if len(group) >= 2 && paid >= 2 {
		a.Advice = a.refundSentences(refunded)
	}
	return a
}

// refundSentences is the advice on a purchase charged on more than one order.
func (a *tapAdvice) refundSentences(refunded int64) []string {
	cur := a.orders[0].Currency
	format := func(n int64) string { return money.Format(n, cur) }
	for _, s := range a.Steps {
		a.Named = append(a.Named, s.Order)
	}
	if refunded == 0 {
		allFull := true
		for _, s := range a.Steps {
			allFull = allFull && s.Full
		}
		switch {
		case a.Stuck > 0:
		case len(a.Steps) == 1 && allFull && len(a.orders) == 2 && a.Steps[0].Order == a.orders[1].PublicID:
			return []string{fmt.Sprintf("If the customer meant to pay once, refund the second order (%s) in full, from its page.", a.Steps[0].Order)}
		case allFull && len(a.Steps) == len(a.orders)-1:
			return []string{fmt.Sprintf("If the customer meant to pay once, refund every order but the first in full (%s), each from its page.", strings.Join(a.Named, ", "))}
		}
		if len(a.Steps) == 0 {
			return a.withStuck(nil, format)
		}
		return a.withStuck([]string{"If the customer meant to pay once, " + a.stepsText(format) + "."}, format)
	}
	var parts []string
	for _, o := range a.orders {
		if o.Refunded > 0 {
			parts = append(parts, fmt.Sprintf("%s on order %s", format(o.Refunded), o.PublicID))
		}
	}
	so := "Refunded (or being refunded) so far: " + strings.Join(parts, " and ") + "."
	switch {
	case a.Left == 0:
		return []string{so + " That is every charge but one: the customer has paid once. Nothing more to refund; do not refund any of these orders again."}
	case a.Left < 0:
		return []string{so + fmt.Sprintf(" That is %s more than the charges beyond the first: the customer has been refunded for the purchase itself. Do not refund again; ask the customer whether they meant to buy it.", format(-a.Left))}
	}
	return a.withStuck([]string{so + " If the customer meant to pay once, " + a.stepsText(format) + "."}, format)
}

// withStuck adds to the advice what cannot be refunded from the console, if anything.
func (a *tapAdvice) withStuck(advice []string, format func(int64) string) []string {
	if a.Stuck <= 0 {
		return advice
	}
	s := fmt.Sprintf("%s of the charges beyond one purchase cannot be refunded here: an order in installments is refunded from its first installment's charge only. Refund it at the payment provider, from the later installments' charges.", format(a.Stuck))
	if len(a.Steps) == 0 {
		return append(advice[:0:0], s)
	}
	return append(advice, s)
}

// stepsText says the refunds left to make: "refund 10.00 TRY more (not a full refund),
// from order ord_b".
func (a *tapAdvice) stepsText(format func(int64) string) string {
	if len(a.Steps) == 1 {
		s := a.Steps[0]
		if s.Full && a.orderByID(s.Order).Refunded == 0 {
			return fmt.Sprintf("refund order %s in full (%s), from its page", s.Order, format(s.Amount))
		}
		return fmt.Sprintf("refund %s more (not a full refund), from order %s", format(s.Amount), s.Order)
	}
	var parts []string
	for _, s := range a.Steps {
		how := ""
		if s.Full {
			how = ", all that is left of it"
		}
		parts = append(parts, fmt.Sprintf("%s from order %s%s", format(s.Amount), s.Order, how))
	}
	return fmt.Sprintf("refund %s more in all: %s; each from its page", format(a.Left), strings.Join(parts, " and "))
}

func (a *tapAdvice) orderByID(id string) tapOrder {
	for _, o := range a.orders {
		if o.PublicID == id {
			return o
		}
	}
	return tapOrder{}
}

// refundForm is what the refund form of order id prefills, and what it warns of: at most
// what is left to refund for the customer to have paid once. confirm: refunding more than
// prefill needs the order's id typed out. A warning is given when another order of the
// purchase is refunded (in part or in full), or when refunding all of this order would
// refund more than is left.
func (a tapAdvice) refundForm(id string) (prefill int64, warning string, confirm bool) {
	self := a.orderByID(id)
	if len(a.orders) < 2 || self.PublicID == "" {
		return self.left(), "", false
	}
	cur := self.Currency
	format := func(n int64) string { return money.Format(n, cur) }
	prefill = min(self.left(), max(a.Left, 0))
	keptPlan := a.kept >= 0 && a.orders[a.kept].PublicID == id && self.Charged.Installments > 1
	if keptPlan {
		// Refunding the order that stands cancels the rest of its plan, while the others'
		// plans go on: the refunds are for the other orders.
		prefill = 0
	}
	var done []string
	for _, o := range a.orders {
		switch {
		case o.PublicID == id || o.Refunded <= 0:
		case o.Refunded >= o.Charged.Total():
			done = append(done, fmt.Sprintf("order %s, in full (%s)", o.PublicID, format(o.Refunded)))
		default:
			done = append(done, fmt.Sprintf("order %s, in part (%s of the %s charged)", o.PublicID, format(o.Refunded), format(o.Charged.Total())))
		}
	}
	confirm = prefill < self.left()
	if len(done) == 0 && !confirm {
		return prefill, "", false
	}
	var others []string
	for _, o := range a.orders {
		if o.PublicID != id {
			others = append(others, "order "+o.PublicID)
		}
	}
	keys := "another key"
	if len(others) > 1 {
		keys = "other keys"
	}
	w := "This order looks like a double tap of " + strings.Join(others, " and ") +
		": the same customer, amount, items and card, under " + keys + ". The customer was charged " + a.Times + " for one purchase."
	if len(done) > 0 {
		w += " Refunded already: " + strings.Join(done, " and ") + "."
	}
	switch {
	case keptPlan && a.Left > 0:
		var named []string
		for _, st := range a.Steps {
			named = append(named, "order "+st.Order)
		}
		w += fmt.Sprintf(" %s is left to refund, but not from this order: it is the one to keep, and a refund of it would cancel the rest of its plan while the other plans go on charging. Refund %s instead; to refund this one anyway, type this order's id (%s).",
			format(a.Left), strings.Join(named, " and "), id)
	case a.Left <= 0:
		w += " The customer has paid once already: nothing is left to refund, and refunding this order as well refunds the customer twice for one purchase. Compare the orders first; to refund anyway, type this order's id (" + id + ")."
	case confirm:
		w += fmt.Sprintf(" To have the customer pay once, %s is left to refund, not this order's %s: the amount below is that. Refunding more would refund the customer twice for one purchase; to refund more than %s, type this order's id (%s).",
			format(a.Left), format(self.left()), format(prefill), id)
	default:
		w += fmt.Sprintf(" To have the customer pay once, %s is left to refund over these orders; the amount below is what of it this order can take.", format(a.Left))
	}
	return prefill, w, confirm
}

// chargesText says what an order was charged: "charge ch_1 of 45.00 TRY", or for a plan
// "2 of its 3 installments charged: charge ch_1 of 15.00 TRY and charge ch_2 of 15.00 TRY, 30.00
// TRY of 45.00 TRY so far".
func chargesText(o tapOrder) string {
	format := func(n int64) string { return money.Format(n, o.Currency) }
	var each []string
	for _, ch := range o.Charged.Charges {
		each = append(each, fmt.Sprintf("charge %s of %s", ch.ChargeID, format(ch.Amount)))
	}
	switch {
	case len(each) == 0:
		return "no charge"
	case o.Charged.Installments <= 1:
		return strings.Join(each, " and ")
	}
	return fmt.Sprintf("%d of its %d installments charged: %s, %s of %s so far", len(each), o.Charged.Installments,
		strings.Join(each, " and "), format(o.Charged.Total()), format(o.Amount))
}

// timesText is a count of payments as a sentence ends it.
func timesText(n int) string {
	switch n {
	case 0:
		return "not at all"
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
