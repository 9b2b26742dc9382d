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

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/views"
)

// Bounds of the double-tap window, the server's setting (TEKRAR_DOUBLE_TAP_WINDOW) and the
// search form's override alike.
const (
	defaultDoubleTapWindow = 2 * time.Minute
	minDoubleTapWindow     = time.Second
	maxDoubleTapWindow     = checkout.MaxDoubleTapWindow
)

func orderHref(id int64) string { return "/admin/orders/" + strconv.FormatInt(id, 10) }

// orders is the complaint search: the orders matching what the customer said, and above
// them the pairs that look like one purchase charged twice.
func (a *console) orders(c *gin.Context) {
	q := func(name string) string { return strings.TrimSpace(c.Query(name)) }
	f := views.OrderFilter{Client: q("client"), Customer: q("customer"), Email: q("email"), Last4: q("last4"),
		Amount: q("amount"), Currency: strings.ToUpper(q("currency")), From: q("from"), To: q("to"), Window: q("window")}
	after := c.Query("after")
	p := views.OrdersPage{Nav: nav(c, "Orders"), Filter: f, DefaultWindow: durationText(a.DoubleTapWindow), FirstPage: after == ""}
	of, window, err := a.orderFilter(f)
	if err != nil {
		p.Error = err.Error()
		a.render(c, http.StatusBadRequest, views.OrdersList(p))
		return
	}
	ctx := c.Request.Context()
	rows, next, err := checkout.FindOrders(ctx, a.DB, of, checkout.Page{After: after})
	if errors.Is(err, checkout.ErrInvalidQuery) {
		p.Error = err.Error()
		a.render(c, http.StatusBadRequest, views.OrdersList(p))
		return
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	ids := make([]int64, len(rows))
	for i, o := range rows {
		ids[i] = o.ID
	}
	refunds, err := checkout.OrderRefunds(ctx, a.DB, ids)
	if err != nil {
		a.fail(c, err)
		return
	}
	for _, o := range rows {
		p.Rows = append(p.Rows, orderLine(o, refunds[o.ID]))
	}
	if p.FirstPage {
		p.Window = durationText(window)
		if err := a.doubleTaps(ctx, &p, of, window); err != nil {
			a.fail(c, err)
			return
		}
	}
	p.Next = nextHref(c, "/admin/orders", "after", next)
	a.render(c, http.StatusOK, views.OrdersList(p))
}

// doubleTaps fills the page's suspected double taps, each side with the request that made it.
func (a *console) doubleTaps(ctx context.Context, p *views.OrdersPage, f checkout.OrderFilter, window time.Duration) error {
	taps, err := checkout.SuspectedDoubleTaps(ctx, a.DB, f, window)
	if errors.Is(err, checkout.ErrInvalidQuery) {
		// The window is checked already: what is missing is a time range or a customer,
		// without which the detector would read every order.
		p.PairsNote = "Double taps are looked for when the search has a time range (from and to) or a customer id or email."
		return nil
	}
	if err != nil {
		return err
	}
	var orders []checkout.OrderRow
	for _, t := range taps {
		orders = append(orders, t.First, t.Second)
	}
	arrivals, err := checkout.OrderArrivals(ctx, a.DB, orders)
	if err != nil {
		return err
	}
	side := func(o checkout.OrderRow) views.PairSide {
		s := views.PairSide{Order: orderLine(o, nil), Items: itemsSummary(o.Items)}
		if e, ok := arrivals[o.ID]; ok {
			s.Arrived, s.Device, s.Address = e.At, e.UserAgent, e.RemoteAddr
		}
		return s
	}
	for _, t := range taps {
		p.Pairs = append(p.Pairs, views.PairLine{Gap: gapText(t.Gap), Compare: pairHref(t.First.ID, t.Second.ID),
			First: side(t.First), Second: side(t.Second)})
	}
	return nil
}

func pairHref(first, second int64) string {
	return fmt.Sprintf("/admin/orders/pair?first=%d&second=%d", first, second)
}

// orderFilter turns the search form into a query filter and the double-tap window,
// refusing with a sentence what cannot be a value.
func (a *console) orderFilter(f views.OrderFilter) (checkout.OrderFilter, time.Duration, error) {
	of := checkout.OrderFilter{CustomerID: f.Customer, CustomerEmail: f.Email}
	var err error
	if f.Client != "" {
		if of.ClientID, err = strconv.ParseInt(f.Client, 10, 64); err != nil || of.ClientID <= 0 {
			return of, 0, errors.New("client id must be a number")
		}
	}
	if f.Last4 != "" && (len(f.Last4) != 4 || strings.Trim(f.Last4, "0123456789") != "") {
		return of, 0, errors.New("card last 4 must be the last 4 digits of the card, like 4242")
	}
	of.CardLast4 = f.Last4
	if f.Currency != "" && !checkout.ValidCurrency(f.Currency) {
		return of, 0, errors.New("currency must be an ISO 4217 code such as TRY or EUR")
	}
	if f.Amount != "" {
		if of.Amount, err = checkout.ParseAmount(f.Amount, f.Currency); err != nil {
			return of, 0, err
		}
	}
	if of.From, err = formTime(f.From); err != nil {
		return of, 0, err
	}
	if of.To, err = formTime(f.To); err != nil {
		return of, 0, err
	}
	if !of.From.IsZero() && !of.To.IsZero() && !of.From.Before(of.To) {
		return of, 0, errors.New("from must be before to")
	}
	window := a.DoubleTapWindow
	if f.Window != "" {
		window, err = time.ParseDuration(f.Window)
		if err != nil || window < minDoubleTapWindow || window > maxDoubleTapWindow {
			return of, 0, fmt.Errorf("the double-tap window must be a duration from %s to %s, like 2m or 90s",
				durationText(minDoubleTapWindow), durationText(maxDoubleTapWindow))
		}
	}
	return of, window, nil
}

// orderLine is an order as a line of the search results.
func orderLine(o checkout.OrderRow, refunds []checkout.RefundRow) views.OrderLine {
	l := views.OrderLine{ID: strconv.FormatInt(o.ID, 10), Href: orderHref(o.ID), Created: o.CreatedAt,
		Client: o.ClientName, Customer: o.CustomerID, Email: o.CustomerEmail,
		Amount: checkout.FormatAmount(o.Amount, o.Currency), Status: o.Status, Keys: keyLinks(o.ClientID, o.Keys)}
	if p := o.Payment; p != nil {
		l.Payment, l.Charge = paymentText(p), p.ChargeID
	}
	for _, r := range refunds {
		l.Refunds = append(l.Refunds, checkout.FormatAmount(r.Amount, r.Currency)+" "+r.Status)
	}
	return l
}

func keyLinks(clientID int64, keys []string) []views.Link {
	var out []views.Link
	for _, k := range keys {
		out = append(out, views.Link{Label: k, Href: keyHref(clientID, k)})
	}
	return out
}

// paymentText is a charge in a few words: "succeeded · visa ••4242".
func paymentText(p *checkout.PaymentRow) string {
	s := p.Status
	if p.CardBrand != "" || p.CardLast4 != "" {
		s += " · " + strings.TrimSpace(p.CardBrand+" ••"+p.CardLast4)
	}
	if p.DeclineCode != "" {
		s += " (" + p.DeclineCode + ")"
	}
	return s
}

// items reads an order's stored items; ok is false if they are not a list of items.
func items(raw json.RawMessage) ([]checkout.Item, bool) {
	var its []checkout.Item
	if err := json.Unmarshal(raw, &its); err != nil {
		return nil, false
	}
	return its, true
}

// itemsSummary is an order's items in one line: "2 × Latte, 1 × Tea".
func itemsSummary(raw json.RawMessage) string {
	its, ok := items(raw)
	if !ok {
		return string(raw)
	}
	parts := make([]string, len(its))
	for i, it := range its {
		parts[i] = fmt.Sprintf("%d × %s", it.Quantity, it.Name)
	}
	return strings.Join(parts, ", ")
}

func (a *console) order(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		c.String(http.StatusNotFound, "no such order")
		return
	}
	s, err := a.loadOrder(c.Request.Context(), id)
	if errors.Is(err, checkout.ErrOrderNotFound) {
		c.String(http.StatusNotFound, "no such order")
		return
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	a.render(c, http.StatusOK, views.OrderDetailPage(views.OrderPage{Nav: nav(c, "Orders"), Verdict: orderVerdict(s), Order: s.card}))
}

// orderPair compares two orders: one purchase charged twice, or not?
func (a *console) orderPair(c *gin.Context) {
	var ids [2]int64
	for i, name := range []string{"first", "second"} {
		id, err := strconv.ParseInt(c.Query(name), 10, 64)
		if err != nil || id <= 0 {
			c.String(http.StatusBadRequest, "%s must be an order id: /admin/orders/pair?first=ID&second=ID", name)
			return
		}
		ids[i] = id
	}
	var s [2]orderStory
	for i, id := range ids {
		var err error
		s[i], err = a.loadOrder(c.Request.Context(), id)
		if errors.Is(err, checkout.ErrOrderNotFound) {
			c.String(http.StatusNotFound, "no order %d", id)
			return
		}
		if err != nil {
			a.fail(c, err)
			return
		}
	}
	if s[1].d.CreatedAt.Before(s[0].d.CreatedAt) {
		s[0], s[1] = s[1], s[0]
	}
	a.render(c, http.StatusOK, views.OrderPairPage(views.PairPage{Nav: nav(c, "Orders"),
		Verdict: pairVerdict(s[0], s[1]), First: s[0].card, Second: s[1].card}))
}

// orderStory is an order with what its keys saw: the page's card, and the requests of the
// key that created it (this use of the key string only), from which the verdict is drawn.
type orderStory struct {
	d        checkout.OrderDetail
	card     views.OrderCard
	requests []checkout.EventRow // the order key's events; empty if none is recorded
	arrival  *checkout.EventRow  // the request that created the order, if recorded
}

// keySkew is how long before the time a key row records its created event may be stamped:
// both are read from the clock moments apart.
const keySkew = time.Minute

// incarnation keeps the events of one use of a key string that first arrived at since:
// from then (less keySkew) up to the next created event, which starts a later use of the
// same string, after the first was forgotten.
func incarnation(events []checkout.EventRow, since time.Time) []checkout.EventRow {
	from := since.Add(-keySkew)
	var out []checkout.EventRow
	created := false
	for _, e := range events {
		if e.At.Before(from) {
			continue
		}
		if e.Kind == checkout.EventCreated {
			if created {
				break
			}
			created = true
		}
		out = append(out, e)
	}
	return out
}

func (a *console) loadOrder(ctx context.Context, id int64) (orderStory, error) {
	d, err := checkout.GetOrderDetail(ctx, a.DB, id)
	if err != nil {
		return orderStory{}, err
	}
	s := orderStory{d: d, card: orderCard(d)}
	for _, k := range d.Keys {
		events, err := checkout.KeyTimeline(ctx, a.DB, k.ClientID, k.Key)
		if err != nil {
			return orderStory{}, err
		}
		events = incarnation(events, k.FirstAt)
		b := views.KeyBlock{Key: views.Link{Label: k.Key, Href: keyHref(k.ClientID, k.Key)}, State: k.State,
			Role: "created the order", Timeline: timelineEntries(events)}
		if k.RefundID != nil {
			b.Role = "refund " + strconv.FormatInt(*k.RefundID, 10)
		} else if s.arrival == nil {
			s.requests = events
			if i := slices.IndexFunc(events, func(e checkout.EventRow) bool { return e.Kind == checkout.EventCreated }); i >= 0 {
				s.arrival = &events[i]
			}
		}
		if k.ForgetAt != nil {
			b.Note = "Expired and swept: a retry with this key is refused until " + utc(*k.ForgetAt) + ", then the key is forgotten."
		}
		s.card.Keys = append(s.card.Keys, b)
	}
	return s, nil
}

// orderCard lays an order out for its page.
func orderCard(d checkout.OrderDetail) views.OrderCard {
	money := func(n int64) string { return checkout.FormatAmount(n, d.Currency) }
	o := views.OrderCard{ID: strconv.FormatInt(d.ID, 10), Status: d.Status}
	o.Fields = []views.Field{
		field("Client", fmt.Sprintf("%s (%d)", d.ClientName, d.ClientID)),
		{Label: "Created", At: d.CreatedAt},
		{Label: "Updated", At: d.UpdatedAt},
		field("Amount", money(d.Amount)),
		field("Refunded", money(d.RefundedAmount)),
		field("Customer id", orDash(d.CustomerID)),
		field("Customer email", orDash(d.CustomerEmail)),
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
				Unit: money(it.UnitAmount), Total: money(it.Quantity * it.UnitAmount)})
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
		line := views.RefundLine{ID: strconv.FormatInt(r.ID, 10), Amount: checkout.FormatAmount(r.Amount, r.Currency),
			Status: r.Status, Reason: r.Reason, ProviderID: r.ProviderRefundID, Created: r.CreatedAt}
		if r.Key != "" {
			line.Key = views.Link{Label: r.Key, Href: keyHref(d.ClientID, r.Key)}
		}
		o.Refunds = append(o.Refunds, line)
	}
	return o
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
