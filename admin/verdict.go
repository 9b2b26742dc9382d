package admin

// The answer an operator needs for "I tapped pay once and was charged twice", in words: was
// the customer charged twice, was a repeat caught by its key (a replay) or did two keys make
// two payments (a double tap), and what to do about it.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// Verdict kinds: how the answer is shown.
const (
	verdictTwice   = "twice"   // the customer was charged twice
	verdictOnce    = "once"    // charged once, or not at all
	verdictUnclear = "unclear" // no outcome known yet
)

// requestCounts counts the repeats that reached one key and what they were answered.
type requestCounts struct{ replays, inUse, conflicts, late, resumed int }

func countRequests(history []report.HistoryRow) requestCounts {
	var n requestCounts
	for _, e := range history {
		switch e.Kind {
		case checkout.KindReplayed:
			n.replays++
		case checkout.KindInUseRejected:
			n.inUse++
		case checkout.KindReusedConflict:
			n.conflicts++
		case checkout.KindLateRetry:
			n.late++
		case checkout.KindResumed:
			n.resumed++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// tap is the order as the advice reads it (adviseTap).
func (s orderStory) tap() tapOrder { return tapOrderOf(s.d.OrderRow, s.charges) }

// withAdvice adds the refund advice of adv to v, with links to the orders it names.
func withAdvice(v views.Verdict, adv tapAdvice) views.Verdict {
	v.Advice = append(v.Advice, adv.Advice...)
	for _, st := range adv.Steps {
		v.AdviceLinks = append(v.AdviceLinks, views.Link{Label: "Order " + st.Order, Href: orderHref(st.Order)})
	}
	return v
}

func charged(d report.OrderDetail) bool {
	return d.Payment != nil && d.Payment.Status == "succeeded"
}

// orderKey names the key that created the order, for a sentence.
func orderKey(d report.OrderDetail) string {
	for _, k := range d.Keys {
		if k.RefundID == nil {
			return k.Key
		}
	}
	return "(forgotten)"
}

// orderVerdict answers for one order: how many times its key was sent, and whether that
// charged the customer once.
func orderVerdict(s orderStory) views.Verdict {
	d := s.d
	n := countRequests(s.requests)
	var v views.Verdict
	switch {
	case charged(d):
		v.Kind = verdictOnce
		adv := adviseTap([]tapOrder{s.tap()})
		switch {
		case s.charges.Installments > 1:
			// An order in installments is one purchase charged once per paid installment.
			v.Headline = fmt.Sprintf("One key, one payment request: the customer pays for this order in %d installments; %s charged so far.",
				s.charges.Installments, plural(len(s.charges.Charges), "installment was", "installments were"))
		case n.replays > 0:
			v.Headline = fmt.Sprintf("One key, %s: the customer was charged once.", plural(n.replays, "replay", "replays"))
		default:
			v.Headline = "One key, one payment request: the customer was charged once for this order."
		}
		if s.charges.Installments > 1 {
			v.Facts = append(v.Facts, fmt.Sprintf("The first request with key %s made this order; %s.", orderKey(d), adv.Charges[d.PublicID]))
		} else {
			v.Facts = append(v.Facts, fmt.Sprintf("The first request with key %s made this order and %s.", orderKey(d), adv.Charges[d.PublicID]))
		}
		if n.replays > 0 {
			v.Facts = append(v.Facts, fmt.Sprintf("%s with the same key got the stored answer of the first: no new order, no new charge.",
				capitalise(plural(n.replays, "repeat", "repeats"))))
		}
		if n := len(s.charges.Charges); s.charges.Installments > 1 && n > 1 {
			// Each paid installment is a charge of its own: the plan, not a double charge.
			v.Advice = append(v.Advice, fmt.Sprintf("The customer sees one charge per paid installment (%d so far, as listed above): that is the plan, not a double charge. If they see more, search their card's last 4 digits over a wider time window.", n))
		}
		v.Advice = append(v.Advice, "If the customer sees two charges, search their card's last 4 digits and this amount over a wider time window: another order made the other charge, and the search flags it if it looks like a double tap.")
	case d.Payment != nil:
		v.Kind = verdictOnce
		v.Headline = fmt.Sprintf("The card was declined (%s): the customer was not charged for this order.", orDash(d.Payment.DeclineCode))
	default:
		v.Kind = verdictUnclear
		v.Headline = fmt.Sprintf("No charge is recorded for this order (status %s).", d.Status)
		for _, k := range d.Keys {
			if k.RefundID == nil && k.State == checkout.StateNeedsAttention {
				v.Facts = append(v.Facts, "Its key needs attention: the payment's outcome is not known; resolve the key before answering the customer.")
			}
		}
	}
	v.Facts = append(v.Facts, repeatFacts(n)...)
	if e := s.arrival; e != nil {
		v.Facts = append(v.Facts, fmt.Sprintf("The payment came from %s at %s.", orDash(e.UserAgent), orDash(e.RemoteAddr)))
	}
	if d.RefundedAmount > 0 {
		v.Facts = append(v.Facts, fmt.Sprintf("Refunded (or being refunded): %s of %s charged.", money.Format(d.RefundedAmount, d.Currency),
			money.Format(s.charges.Total(), d.Currency)))
	}
	return v
}

// repeatFacts are the repeats of a key that were not replays.
func repeatFacts(n requestCounts) []string {
	var out []string
	if n.inUse > 0 {
		out = append(out, fmt.Sprintf("%s arrived while the first was still running and %s told to retry; none charged.",
			capitalise(plural(n.inUse, "repeat", "repeats")), map[bool]string{true: "was", false: "were"}[n.inUse == 1]))
	}
	if n.resumed > 0 {
		out = append(out, fmt.Sprintf("%s took over a payment left unfinished and completed it, without charging again.",
			capitalise(plural(n.resumed, "retry", "retries"))))
	}
	if n.conflicts > 0 {
		out = append(out, fmt.Sprintf("%s reused the key with a different request and %s refused.",
			capitalise(plural(n.conflicts, "request", "requests")), map[bool]string{true: "was", false: "were"}[n.conflicts == 1]))
	}
	if n.late > 0 {
		out = append(out, fmt.Sprintf("%s came after the key had expired and %s refused.",
			capitalise(plural(n.late, "retry", "retries")), map[bool]string{true: "was", false: "were"}[n.late == 1]))
	}
	return out
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// pairVerdict answers for two orders, a made before b: one purchase charged twice by two
// keys, or not. group is the suspected double tap the two are part of (oldest first), when
// there is one: a third tap of the same purchase is counted and named, not left out.
func pairVerdict(a, b orderStory, group []tapOrder) views.Verdict {
	if a.d.PublicID == b.d.PublicID {
		v := orderVerdict(a)
		v.Facts = append([]string{fmt.Sprintf("Both sides are order %s: one order, one charge at most.", a.d.PublicID)}, v.Facts...)
		return v
	}
	gap := gapText(b.d.CreatedAt.Sub(a.d.CreatedAt))
	var shared string
	for _, k := range a.d.OrderRow.Keys {
		if a.d.ClientID == b.d.ClientID && slices.Contains(b.d.OrderRow.Keys, k) {
			shared = k
		}
	}
	var v views.Verdict
	if shared != "" {
		v.Headline = fmt.Sprintf("One key made both orders, %s apart: the key %s had expired and been forgotten before the app sent it again, so tekrar took it for a new payment.", gap, shared)
	} else {
		v.Headline = fmt.Sprintf("Two different idempotency keys %s apart: the app sent two payments (two intents); tekrar could not have merged them.", gap)
	}
	ca, cb := charged(a.d), charged(b.d)
	same := true
	differ := func(format string, args ...any) {
		same = false
		v.Facts = append(v.Facts, fmt.Sprintf(format, args...))
	}
	if a.d.ClientID != b.d.ClientID {
		differ("They came from different apps: %s and %s.", a.d.ClientName, b.d.ClientName)
	}
	switch {
	case a.d.CustomerID != "" && a.d.CustomerID == b.d.CustomerID:
		v.Facts = append(v.Facts, fmt.Sprintf("Same customer: %s.", a.d.CustomerID))
	case a.d.CustomerEmail != "" && strings.EqualFold(a.d.CustomerEmail, b.d.CustomerEmail):
		v.Facts = append(v.Facts, fmt.Sprintf("Same customer: %s.", a.d.CustomerEmail))
	default:
		differ("Different customers: %s and %s.", customerText(a.d), customerText(b.d))
	}
	amountA, amountB := money.Format(a.d.Amount, a.d.Currency), money.Format(b.d.Amount, b.d.Currency)
	if amountA == amountB {
		v.Facts = append(v.Facts, fmt.Sprintf("Same amount: %s.", amountA))
	} else {
		differ("Different amounts: %s and %s.", amountA, amountB)
	}
	if string(a.d.Items) == string(b.d.Items) {
		v.Facts = append(v.Facts, fmt.Sprintf("Same items: %s.", itemsSummary(a.d.Items)))
	} else {
		differ("Different items: %s and %s.", itemsSummary(a.d.Items), itemsSummary(b.d.Items))
	}
	if a.d.Payment != nil && b.d.Payment != nil {
		cardA, cardB := cardText(a.d.Payment), cardText(b.d.Payment)
		if cardA == cardB {
			v.Facts = append(v.Facts, fmt.Sprintf("Same card: %s.", cardA))
		} else {
			// Two cards are two payments the customer chose to make, not one sent twice.
			differ("Paid with different cards: %s and %s.", cardA, cardB)
		}
	}
	if !slices.ContainsFunc(group, func(o tapOrder) bool { return o.PublicID == a.d.PublicID }) ||
		!slices.ContainsFunc(group, func(o tapOrder) bool { return o.PublicID == b.d.PublicID }) {
		group = []tapOrder{a.tap(), b.tap()}
	}
	adv := adviseTap(group)
	var charges []string
	switch {
	case ca && cb && same:
		v.Kind = verdictTwice
		v.Headline += " The customer was charged " + adv.Times + "."
		for _, o := range group {
			if o.PublicID != a.d.PublicID && o.PublicID != b.d.PublicID {
				charges = append(charges, fmt.Sprintf("Order %s, too, is the same purchase charged again (%s).", o.PublicID, adv.Charges[o.PublicID]))
				v.Related = append(v.Related, views.Link{Label: "Order " + o.PublicID, Href: orderHref(o.PublicID)})
			}
		}
	case ca && cb:
		v.Kind = verdictUnclear
		v.Headline += " Both were charged, but they do not look like one purchase (see how they differ)."
	case ca || cb:
		v.Kind = verdictOnce
		v.Headline += " Only one of them was charged."
		paid, other := a, b
		if cb {
			paid, other = b, a
		}
		charges = append(charges, fmt.Sprintf("Order %s was charged (%s); order %s was not (%s).", paid.d.PublicID, adv.Charges[paid.d.PublicID], other.d.PublicID, other.d.Status))
	default:
		v.Kind = verdictOnce
		v.Headline += " Neither was charged."
	}
	if ca && cb {
		charges = append([]string{fmt.Sprintf("Order %s: %s. Order %s: %s.", a.d.PublicID, adv.Charges[a.d.PublicID], b.d.PublicID, adv.Charges[b.d.PublicID])}, charges...)
	}
	v.Facts = append(charges, v.Facts...)
	v.Facts = append(v.Facts, deviceFact(a, b, same))
	for _, s := range []orderStory{a, b} {
		if n := countRequests(s.requests); n.replays > 0 {
			v.Facts = append(v.Facts, fmt.Sprintf("Key %s of order %s was also sent %s; each got the stored answer, with no new charge.",
				orderKey(s.d), s.d.PublicID, plural(n.replays, "more time", "more times")))
		}
	}
	switch {
	case ca && cb && same:
		v = withAdvice(v, adv)
		if shared != "" {
			v.Advice = append(v.Advice, "Tell the app's team: the app sent a key again long after its first use (past the key's lifetime and grace). A key must name one purchase only.")
		} else {
			v.Advice = append(v.Advice, "Tell the app's team: the app made a new idempotency key for the same purchase. It must make the key once per purchase and send that key with every tap and retry until it has an answer; tekrar then answers the repeat with the first payment instead of charging again.")
		}
	case ca && cb:
		v.Advice = append(v.Advice, "These look like two purchases (see the differences above): ask the customer before refunding either.")
	default:
		v.Advice = append(v.Advice, "There is no double charge to refund. If the customer still sees two charges, search their card's last 4 digits and the amount over a wider time window.")
	}
	return v
}

// cardText names a charge's card: "visa ••4242".
func cardText(p *report.PaymentRow) string {
	return strings.TrimSpace(p.CardBrand + " ••" + p.CardLast4)
}

func customerText(d report.OrderDetail) string {
	switch {
	case d.CustomerID != "" && d.CustomerEmail != "":
		return d.CustomerID + " (" + d.CustomerEmail + ")"
	case d.CustomerID != "":
		return d.CustomerID
	case d.CustomerEmail != "":
		return d.CustomerEmail
	}
	return "anonymous"
}

// deviceFact says whether the two payments came from one device, from the requests that
// created them; samePurchase: the orders look like one purchase.
func deviceFact(a, b orderStory, samePurchase bool) string {
	ea, eb := a.arrival, b.arrival
	switch {
	case ea == nil || eb == nil:
		return "Which device sent each payment is not known: the requests' history is no longer recorded (it is kept for TEKRAR_EVENT_RETENTION)."
	case ea.UserAgent == eb.UserAgent && ea.RemoteAddr == eb.RemoteAddr && samePurchase:
		return fmt.Sprintf("Both payments came from the same device (%s) and address (%s): one app sent the purchase twice.", orDash(ea.UserAgent), orDash(ea.RemoteAddr))
	case ea.UserAgent == eb.UserAgent && ea.RemoteAddr == eb.RemoteAddr:
		return fmt.Sprintf("Both payments came from the same device (%s) and address (%s).", orDash(ea.UserAgent), orDash(ea.RemoteAddr))
	case samePurchase:
		return fmt.Sprintf("They came from different devices or addresses: %s at %s, then %s at %s. The customer may have paid twice on purpose, from two places: ask before refunding.",
			orDash(ea.UserAgent), orDash(ea.RemoteAddr), orDash(eb.UserAgent), orDash(eb.RemoteAddr))
	}
	return fmt.Sprintf("They came from different devices or addresses: %s at %s, then %s at %s.",
		orDash(ea.UserAgent), orDash(ea.RemoteAddr), orDash(eb.UserAgent), orDash(eb.RemoteAddr))
}
