package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// The page of one order, and the side-by-side page of two: what an operator opens to answer
// "was I charged twice?".

func (a *console) order(c *gin.Context) error {
	s, err := a.loadOrder(c.Request.Context(), c.Param("id"))
	if err != nil {
		return err // checkout.ErrOrderNotFound: a 404
	}
	v := orderVerdict(s)
	g, group, err := a.doubleTapOf(c.Request.Context(), a.Read, s.d.OrderRow)
	if err != nil {
		return err
	}
	if len(group) > 0 {
		v = withDoubleTap(v, s.d, g, group)
	}
	n := nav(c, "Orders")
	if s.card.Events, err = a.orderEvents(c.Request.Context(), s.d.ID, n.CanAct); err != nil {
		return err
	}
	s.card.ShowEvents = true
	return a.render(c, http.StatusOK, views.OrderDetailPage(views.OrderPage{Nav: n, Verdict: forRole(v, n), Order: s.card}))
}

// orderEvents lays out the events about order id with each one's delivery per endpoint; an
// admin (canAct) gets the redelivery of each.
func (a *console) orderEvents(ctx context.Context, id int64, canAct bool) ([]views.EventBlock, error) {
	es, err := report.OrderEvents(ctx, a.Read, id)
	if err != nil {
		return nil, err
	}
	out := make([]views.EventBlock, 0, len(es))
	for _, e := range es {
		b := views.EventBlock{ID: e.ID, Type: e.Type, Created: e.CreatedAt}
		if e.Sequence != nil {
			b.Sequence = strconv.FormatInt(*e.Sequence, 10)
		}
		b.Summary, b.SummaryClass = eventState(e.Dispatch, e.Counts())
		for _, d := range e.Deliveries {
			l := views.EventDeliveryLine{Endpoint: views.Link{Label: d.EndpointID, Href: "/admin/webhooks/" + d.EndpointID},
				URL: d.EndpointURL, State: deliveryState(d.State, d.Attempts), Attempts: strconv.Itoa(d.Attempts), LastStatus: "—"}
			l.StateClass = l.State
			if d.Attempts > 0 {
				l.LastStatus = lastOutcome(d.LastStatus, d.LastError)
			}
			if d.LastResponse != nil {
				l.Excerpt = excerpt(*d.LastResponse)
			}
			if d.LastAttemptAt != nil {
				l.LastAt = *d.LastAttemptAt
			}
			if d.NextAttemptAt != nil && d.State == "pending" {
				l.Next = *d.NextAttemptAt
			}
			if canAct {
				l.RedeliverHref = redeliverHref(d.ID)
			}
			b.Deliveries = append(b.Deliveries, l)
		}
		out = append(out, b)
	}
	return out, nil
}

// doubleTapOf returns the suspected double tap order o is part of (see
// report.DoubleTapsOf), with what each of its orders was charged and refunded for
// adviseTap; none when there is none. q is the console's reader on its page, the primary
// for the refund form's advice.
func (a *console) doubleTapOf(ctx context.Context, q sqlx.QueryerContext, o report.OrderRow) (report.DoubleTap, []tapOrder, error) {
	g, ok, err := report.DoubleTapsOf(ctx, q, o, a.DoubleTapWindow)
	if err != nil || !ok {
		return g, nil, err
	}
	ids := make([]int64, len(g.Orders))
	for i, x := range g.Orders {
		ids[i] = x.ID
	}
	charges, err := report.ChargesOf(ctx, q, ids)
	if err != nil {
		return g, nil, fmt.Errorf("double tap of order %s: %w", o.PublicID, err)
	}
	group := make([]tapOrder, len(g.Orders))
	for i, x := range g.Orders {
		group[i] = tapOrderOf(x, charges[x.ID])
	}
	return g, group, nil
}

// withDoubleTap adds to an order's verdict the other orders of its suspected double tap: on
// its own the order was "charged once", and the operator was not told of the charge beside
// it. group is g as adviseTap reads it.
func withDoubleTap(v views.Verdict, d report.OrderDetail, g report.DoubleTap, group []tapOrder) views.Verdict {
	v.Kind = verdictTwice
	others := len(g.Orders) - 1
	adv := adviseTap(group)
	v.Headline = fmt.Sprintf("This order is one of %d orders of the same customer, amount, items and card, each under its own key: a suspected double tap; the customer was charged %s for one purchase.",
		len(g.Orders), adv.Times)
	if others == 1 {
		v.Headline = fmt.Sprintf("This order and another of the same customer, amount, items and card were both charged, under another key: a suspected double tap; the customer was charged %s for one purchase.", adv.Times)
	}
	for _, o := range g.Orders {
		if o.ID == d.ID {
			continue
		}
		when := "after"
		if o.CreatedAt.Before(d.CreatedAt) {
			when = "before"
		}
		v.Facts = append(v.Facts, fmt.Sprintf("Order %s was made %s %s this one (%s, key %s): %s.",
			o.PublicID, gapText(o.CreatedAt.Sub(d.CreatedAt)), when, statusWords(o.Status), strings.Join(o.Keys, ", "), adv.Charges[o.PublicID]))
		first, second := d.PublicID, o.PublicID
		if o.CreatedAt.Before(d.CreatedAt) {
			first, second = second, first
		}
		v.Related = append(v.Related, views.Link{Label: "Compare with order " + o.PublicID, Href: pairHref(first, second)})
	}
	advice := v.Advice
	v.Advice = nil
	v = withAdvice(v, adv)
	for _, a := range advice {
		if !strings.HasPrefix(a, "If the customer sees two charges") {
			v.Advice = append(v.Advice, a)
		}
	}
	return v
}

// forRole fits a verdict's advice to who reads it: a viewer cannot refund, so where the
// advice says to refund an order it is told to ask an admin instead of being sent to a
// button it does not have.
func forRole(v views.Verdict, n views.Nav) views.Verdict {
	if n.CanAct {
		return v
	}
	asks := false
	for i, a := range v.Advice {
		for _, from := range []string{", each from its page.", ", from its page.", "; each from its page."} {
			if strings.HasSuffix(a, from) {
				v.Advice[i] = strings.TrimSuffix(a, from) + "."
			}
		}
		asks = asks || strings.Contains(a, "meant to pay once, refund")
	}
	if asks {
		v.Advice = append(v.Advice, "Refunds are made by an admin of this console; a viewer cannot make them. Ask an admin, with the order ids above.")
	}
	return v
}

// disputedNotRefundable says why a disputed order offers no refund.
const disputedNotRefundable = "The cardholder disputes this charge at the payment provider: a refund now could pay them twice. Wait for the dispute's decision; the order's page shows it."

// statusWords is an order status as a sentence says it: "partially refunded".
func statusWords(s string) string { return strings.ReplaceAll(s, "_", " ") }

// orderPair compares two orders: one purchase charged twice, or not?
func (a *console) orderPair(c *gin.Context) error {
	var ids [2]string
	for i, name := range []string{"first", "second"} {
		ids[i] = c.Query(name)
		if !checkout.ValidOrderID(ids[i]) {
			return badRequest(name + " must be an order id: /admin/orders/pair?first=ord_...&second=ord_...")
		}
	}
	var s [2]orderStory
	for i, id := range ids {
		var err error
		s[i], err = a.loadOrder(c.Request.Context(), id)
		if errors.Is(err, checkout.ErrOrderNotFound) {
			return notFound("There is no order " + id + ".")
		}
		if err != nil {
			return err
		}
	}
	if s[1].d.CreatedAt.Before(s[0].d.CreatedAt) {
		s[0], s[1] = s[1], s[0]
	}
	_, group, err := a.doubleTapOf(c.Request.Context(), a.Read, s[0].d.OrderRow)
	if err != nil {
		return err
	}
	n := nav(c, "Orders")
	return a.render(c, http.StatusOK, views.OrderPairPage(views.PairPage{Nav: n,
		Verdict: forRole(pairVerdict(s[0], s[1], group), n), First: s[0].card, Second: s[1].card}))
}

// orderStory is an order with what its keys saw: the page's card, and the requests of the
// key that created it (this use of the key string only), from which the verdict is drawn.
type orderStory struct {
	d        report.OrderDetail
	card     views.OrderCard
	charges  report.OrderCharges // what the provider charged for it, installment by installment
	requests []report.HistoryRow // the order key's history; empty if none is recorded
	arrival  *report.HistoryRow  // the request that created the order, if recorded
}

// keySkew is how long before the time a key row records its created event may be stamped:
// both are read from the clock moments apart.
const keySkew = time.Minute

// incarnation keeps the history of one use of a key string that first arrived at since:
// from then (less keySkew) up to the next created event, which starts a later use of the
// same string, after the first was forgotten.
func incarnation(history []report.HistoryRow, since time.Time) []report.HistoryRow {
	from := since.Add(-keySkew)
	var out []report.HistoryRow
	created := false
	for _, e := range history {
		if e.At.Before(from) {
			continue
		}
		if e.Kind == checkout.KindCreated {
			if created {
				break
			}
			created = true
		}
		out = append(out, e)
	}
	return out
}

// loadOrder reads the order whose public id is publicID; ErrOrderNotFound if there is none.
func (a *console) loadOrder(ctx context.Context, publicID string) (orderStory, error) {
	id, err := report.OrderIDOf(ctx, a.Read, publicID)
	if err != nil {
		return orderStory{}, err
	}
	d, err := report.GetOrderDetail(ctx, a.Read, id)
	if err != nil {
		return orderStory{}, err
	}
	charges, err := report.ChargesOf(ctx, a.Read, []int64{id})
	if err != nil {
		return orderStory{}, err
	}
	s := orderStory{d: d, charges: charges[id]}
	s.card = orderCard(d, s.charges)
	plan, err := report.OrderPlan(ctx, a.Read, id)
	if err != nil {
		return orderStory{}, err
	}
	if len(plan.Installments) > 0 {
		s.card.PlanVerdict, s.card.Installments = planVerdict(plan, d.Currency)
		s.card.PlanZone = plan.TimeZone
	}
	for _, k := range d.Keys {
		history, err := report.KeyTimeline(ctx, a.Read, k.ClientID, k.Key)
		if err != nil {
			return orderStory{}, err
		}
		history = incarnation(history, k.FirstAt)
		b := views.KeyBlock{Key: views.Link{Label: k.Key, Href: keyHref(k.ClientID, k.Key)}, State: k.State,
			Role: "created the order", Timeline: timelineEntries(history)}
		if k.RefundID != nil {
			b.Role = "refund " + k.RefundPublicID
		} else if s.arrival == nil {
			s.requests = history
			if i := slices.IndexFunc(history, func(e report.HistoryRow) bool { return e.Kind == checkout.KindCreated }); i >= 0 {
				s.arrival = &history[i]
			}
		}
		if k.ForgetAt != nil {
			b.Note = "Expired and swept: a retry with this key is refused until " + views.InZone(ctx, *k.ForgetAt) + ", then the key is forgotten."
		}
		s.card.Keys = append(s.card.Keys, b)
	}
	return s, nil
}

// orderCard lays an order out for its page.
func orderCard(d report.OrderDetail, charges report.OrderCharges) views.OrderCard {
	format := func(n int64) string { return money.Format(n, d.Currency) }
	o := views.OrderCard{ID: d.PublicID, Status: d.Status}
	// What may be refunded is what was charged: an order in installments is charged
	// installment by installment, and refunded from its first installment's charge only
	// (tapOrder.left). A register's sale has no charge, and is refused by the refund with
	// its own reason.
	left := d.Amount - d.RefundedAmount
	if charges.Installments > 1 {
		left = tapOrderOf(d.OrderRow, charges).left()
	}
	switch {
	case !checkout.ChargedStatuses.Has(d.Status):
		o.NotRefundable = "Only a paid order can be refunded; this one is " + statusWords(d.Status) + "."
	case d.Status == checkout.StatusDisputed:
		o.NotRefundable = disputedNotRefundable
	case left <= 0:
		o.NotRefundable = "This order is refunded in full (or being refunded): nothing is left to refund."
	default:
		o.Refundable = true
	}
	o.Fields = []views.Field{
		field("Client", fmt.Sprintf("%s (%d)", d.ClientName, d.ClientID)),
		{Label: "Created", At: d.CreatedAt},
		{Label: "Updated", At: d.UpdatedAt},
		field("Amount", format(d.Amount)),
		field("Refunded", format(d.RefundedAmount)),
		field("Customer id", orDash(d.CustomerID)),
		field("Customer email", orDash(d.CustomerEmail)),
	}
	if r := d.Register; r != nil {
		o.Fields = append(o.Fields,
			views.Field{Label: "Register", Value: r.Name + " (" + r.PublicID + ")", Href: registerHref(r.ClientID, r.RegisterID)},
			views.Field{Label: "Sold at the register", At: r.SoldAt},
			views.Field{Label: "Received from it", At: r.ReceivedAt})
		if r.OversoldUnits > 0 {
			o.Fields = append(o.Fields, field("Oversold", strconv.FormatInt(r.OversoldUnits, 10)+" units beyond the stock"))
		}
	}
	if p := d.Payment; p != nil {
		o.Payment = []views.Field{
			field("Charge", p.ChargeID),
			field("Status", p.Status),
			field("Card", strings.TrimSpace(p.CardBrand+" ••"+p.CardLast4)),
			{Label: "Charged", At: p.CreatedAt},
		}
		if p.DeclineCode != "" {
			o.Payment = append(o.Payment, field("Declined", p.DeclineCode))
		}
	}
	if its, ok := items(d.Items); ok {
		for _, it := range its {
			o.Items = append(o.Items, views.ItemLine{SKU: it.SKU, Name: it.Name, Quantity: strconv.FormatInt(it.Quantity, 10),
				Unit: format(it.UnitAmount), Total: format(it.Quantity * it.UnitAmount)})
		}
	} else {
		o.ItemsRaw = string(d.Items)
	}
	if len(d.Metadata) > 0 {
		var m map[string]string
		if err := json.Unmarshal(d.Metadata, &m); err != nil {
			o.Metadata = []views.Field{field("(as stored)", string(d.Metadata))}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			o.Metadata = append(o.Metadata, field(k, m[k]))
		}
	}
	for _, r := range d.Refunds {
		line := views.RefundLine{ID: r.PublicID, Amount: money.Format(r.Amount, r.Currency),
			Status: r.Status, Reason: r.Reason, ProviderID: r.ProviderRefundID, Created: r.CreatedAt}
		if r.Key != "" {
			line.Key = views.Link{Label: r.Key, Href: keyHref(d.ClientID, r.Key)}
		}
		o.Refunds = append(o.Refunds, line)
	}
	o.Compensation = compensationFields(d.Compensation, format)
	if d.Compensation != nil {
		o.CompensationHref = compensationHref(d.PublicID, d.Compensation.ID)
	}
	for _, dp := range d.Disputes {
		line := fmt.Sprintf("%s: %s disputed (%s), opened %s", dp.DisputeID, format(dp.Amount), dp.Reason,
			dp.OpenedAt.UTC().Format(time.RFC3339))
		switch dp.Status {
		case "open":
			line += "; open: the order cannot be refunded until it is decided"
		default:
			line += "; " + dp.Status
		}
		o.Disputes = append(o.Disputes, views.Link{Label: line, Href: disputesHref(d.PublicID, dp.DisputeID)})
	}
	return o
}

// compensationFields shows the refund tekrar owed for a charge it gave up on.
func compensationFields(c *report.Compensation, format func(int64) string) []views.Field {
	if c == nil {
		return nil
	}
	state := map[string]string{
		checkout.CompensationWatching:        "watching: no charge has appeared yet; tekrar looks again until " + c.WatchUntil.UTC().Format(time.RFC3339),
		checkout.CompensationRefunded:        "refunded: a charge appeared after the order was canceled, and tekrar refunded what the provider had not already refunded of it",
		checkout.CompensationNoCharge:        "settled: the provider has no charge under the order's key",
		checkout.CompensationAlreadyRefunded: "settled: a charge appeared after the order was canceled, but the provider had already refunded all of it; nothing was owed",
		checkout.CompensationDisputed:        "held: the charge's cardholder disputes it; nothing is refunded while the dispute is open (a refund could pay them twice), and tekrar looks again until the provider says it is decided",
		checkout.CompensationDisputeLost:     "settled: the cardholder won the charge's dispute, and their bank gave them back all that was left to refund; nothing was owed",
	}[c.State]
	f := []views.Field{field("State", state), field("Why", c.Reason), field("Attempts", strconv.Itoa(c.Attempts))}
	if c.ChargeID != nil {
		f = append(f, field("Charge", *c.ChargeID))
	}
	if c.RefundID != nil && c.Amount != nil {
		f = append(f, field("Refund", *c.RefundID+" ("+format(*c.Amount)+")"))
	}
	if c.LastError != nil {
		f = append(f, field("Last error", *c.LastError))
	}
	return f
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// durationText writes a duration without its zero tail: "2m", "90s" as "1m30s", "24h".
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// gapText is the time between two requests as an operator would say it: "30 s", "2 min 5 s".
func gapText(d time.Duration) string {
	d = d.Abs()
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		d = d.Round(time.Second)
		return strings.TrimSuffix(fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60), " 0 s")
	}
	d = d.Round(time.Minute)
	return strings.TrimSuffix(fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60), " 0 min")
}
