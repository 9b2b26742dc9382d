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

// The page of one order, and the side-by-side page of two: what an operator opens to answer
// "was I charged twice?".

func (a *console) order(c *gin.Context) {
	s, err := a.loadOrder(c.Request.Context(), c.Param("id"))
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
	var ids [2]string
	for i, name := range []string{"first", "second"} {
		ids[i] = c.Query(name)
		if !checkout.ValidOrderID(ids[i]) {
			c.String(http.StatusBadRequest, "%s must be an order id: /admin/orders/pair?first=ord_...&second=ord_...", name)
			return
		}
	}
	var s [2]orderStory
	for i, id := range ids {
		var err error
		s[i], err = a.loadOrder(c.Request.Context(), id)
		if errors.Is(err, checkout.ErrOrderNotFound) {
			c.String(http.StatusNotFound, "no order %s", id)
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

// loadOrder reads the order whose public id is publicID; ErrOrderNotFound if there is none.
func (a *console) loadOrder(ctx context.Context, publicID string) (orderStory, error) {
	id, err := checkout.OrderIDOf(ctx, a.DB, publicID)
	if err != nil {
		return orderStory{}, err
	}
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
			b.Role = "refund " + k.RefundPublicID
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
	o := views.OrderCard{ID: d.PublicID, Status: d.Status}
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
		line := views.RefundLine{ID: r.PublicID, Amount: checkout.FormatAmount(r.Amount, r.Currency),
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
