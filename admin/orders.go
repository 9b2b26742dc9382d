package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// Bounds of the double-tap window, the server's setting (TEKRAR_DOUBLE_TAP_WINDOW) and the
// search form's override alike.
const (
	defaultDoubleTapWindow = 2 * time.Minute
	minDoubleTapWindow     = time.Second
	maxDoubleTapWindow     = report.MaxDoubleTapWindow
)

// orderHref links an order's page by its public id: the console never shows the internal one.
func orderHref(publicID string) string { return "/admin/orders/" + publicID }

// orders is the complaint search: the orders matching what the customer said, and above
// them the pairs that look like one purchase charged twice.
func (a *console) orders(c *gin.Context) error {
	f := orderForm(c)
	after := c.Query("after")
	p := views.OrdersPage{Nav: nav(c, "Orders"), Filter: f, DefaultWindow: durationText(a.DoubleTapWindow), FirstPage: after == "",
		Export: exportHref(c, "/admin/orders.csv")}
	of, window, err := a.orderFilter(f, views.ZoneOf(c.Request.Context()))
	if err != nil {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.OrdersList(p))
	}
	ctx := c.Request.Context()
	rows, next, err := report.FindOrders(ctx, a.Read, of, report.Page{After: after})
	if errors.Is(err, report.ErrInvalidQuery) {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.OrdersList(p))
	}
	if err != nil {
		return err
	}
	ids := make([]int64, len(rows))
	for i, o := range rows {
		ids[i] = o.ID
	}
	refunds, err := report.OrderRefunds(ctx, a.Read, ids)
	if err != nil {
		return err
	}
	for _, o := range rows {
		p.Rows = append(p.Rows, orderLine(o, refunds[o.ID]))
	}
	if p.FirstPage {
		p.Window = durationText(window)
		if err := a.doubleTaps(ctx, &p, of, window); err != nil {
			return err
		}
	}
	p.Next = nextHref(c, "/admin/orders", "after", next)
	return a.render(c, http.StatusOK, views.OrdersList(p))
}

// doubleTaps fills the page's suspected double taps, each side with the request that made it.
func (a *console) doubleTaps(ctx context.Context, p *views.OrdersPage, f report.OrderFilter, window time.Duration) error {
	taps, err := report.SuspectedDoubleTaps(ctx, a.Read, f, window)
	if errors.Is(err, report.ErrInvalidQuery) {
		// The window is checked already: what is missing is a time range or a customer,
		// without which the detector would read every order.
		p.PairsNote = "Double taps are looked for when the search has a time range (from and to) or a customer id or email."
		return nil
	}
	if err != nil {
		return err
	}
	var orders []report.OrderRow
	for _, t := range taps {
		orders = append(orders, t.Orders...)
	}
	arrivals, err := report.OrderArrivals(ctx, a.Read, orders)
	if err != nil {
		return err
	}
	side := func(o report.OrderRow) views.PairSide {
		s := views.PairSide{Order: orderLine(o, nil), Items: itemsSummary(o.Items)}
		if e, ok := arrivals[o.ID]; ok {
			s.Arrived, s.Device, s.Address = e.At, e.UserAgent, e.RemoteAddr
		}
		return s
	}
	for _, t := range taps {
		first := t.Orders[0]
		l := views.PairLine{Gap: gapText(t.Gap), Compare: pairHref(first.PublicID, t.Orders[1].PublicID)}
		for i, o := range t.Orders {
			l.Sides = append(l.Sides, side(o))
			if i >= 2 {
				l.CompareMore = append(l.CompareMore, views.Link{Label: "Compare the first with order " + o.PublicID,
					Href: pairHref(first.PublicID, o.PublicID)})
			}
		}
		p.Pairs = append(p.Pairs, l)
	}
	return nil
}

func pairHref(first, second string) string {
	return "/admin/orders/pair?first=" + url.QueryEscape(first) + "&second=" + url.QueryEscape(second)
}

// orderForm reads the orders search form from the query.
func orderForm(c *gin.Context) views.OrderFilter {
	q := func(name string) string { return strings.TrimSpace(c.Query(name)) }
	return views.OrderFilter{Client: q("client"), Customer: q("customer"), Email: q("email"), Last4: q("last4"),
		Amount: q("amount"), Currency: strings.ToUpper(q("currency")), From: q("from"), To: q("to"), Window: q("window")}
}

// orderFilter turns the search form into a query filter and the double-tap window,
// refusing with a sentence what cannot be a value.
func (a *console) orderFilter(f views.OrderFilter, loc *time.Location) (report.OrderFilter, time.Duration, error) {
	of := report.OrderFilter{CustomerID: f.Customer, CustomerEmail: f.Email}
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
	if f.Currency != "" && !money.ValidCurrency(f.Currency) {
		return of, 0, errors.New("currency must be an ISO 4217 code such as TRY or EUR")
	}
	if f.Amount != "" {
		if of.Amount, err = money.Parse(f.Amount, f.Currency); err != nil {
			return of, 0, err
		}
	}
	if of.From, err = formTime(f.From, loc); err != nil {
		return of, 0, err
	}
	if of.To, err = formTime(f.To, loc); err != nil {
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
func orderLine(o report.OrderRow, refunds []report.RefundRow) views.OrderLine {
	l := views.OrderLine{ID: o.PublicID, Href: orderHref(o.PublicID), Created: o.CreatedAt,
		Client: o.ClientName, Customer: o.CustomerID, Email: o.CustomerEmail,
		Amount: money.Format(o.Amount, o.Currency), Status: o.Status, Keys: keyLinks(o.ClientID, o.Keys)}
	if p := o.Payment; p != nil {
		l.Payment, l.Charge = paymentText(p), p.ChargeID
	}
	for _, r := range refunds {
		l.Refunds = append(l.Refunds, money.Format(r.Amount, r.Currency)+" "+r.Status)
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
func paymentText(p *report.PaymentRow) string {
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
