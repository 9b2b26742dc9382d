package admin

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// outboxEvents lists the outbox's events with their dispatch state, narrowed by ?client=
// (its id), ?type= and ?order= (an order's public id; the order page links here).
func (a *console) outboxEvents(c *gin.Context) error {
	p := views.OutboxPage{Nav: nav(c, "Events"), Types: outbox.Types,
		Client: strings.TrimSpace(c.Query("client")), Type: c.Query("type"), Order: strings.TrimSpace(c.Query("order"))}
	var f report.OutboxFilter
	if p.Client != "" {
		id, err := strconv.ParseInt(p.Client, 10, 64)
		if err != nil || id <= 0 {
			p.Error = "A client id is a positive whole number."
		}
		f.ClientID = id
	}
	if p.Type != "" && !slices.Contains(outbox.Types, p.Type) {
		p.Error = "There is no event type " + strconv.Quote(p.Type) + "."
	}
	if p.Order != "" && !checkout.ValidOrderID(p.Order) {
		p.Error = "An order id looks like ord_ and 32 hex digits."
	}
	if p.Error != "" {
		return a.render(c, http.StatusBadRequest, views.Outbox(p))
	}
	f.Type, f.Order = p.Type, p.Order
	rows, err := report.Outbox(c.Request.Context(), a.Read, f)
	if err != nil {
		return err
	}
	for _, r := range rows {
		l := views.OutboxLine{ID: r.ID, Type: r.Type, Payload: r.Payload, Created: r.CreatedAt,
			Client: r.ClientName + " (" + strconv.FormatInt(r.ClientID, 10) + ")", Attempts: strconv.Itoa(r.Attempts)}
		if r.Order != nil {
			l.Order = views.Link{Label: *r.Order, Href: "/admin/orders/" + *r.Order}
			l.Href = eventHref(*r.Order, r.ID)
		}
		l.Dispatch, l.DispatchClass = eventState(r.Dispatch, r.Deliveries)
		if r.Deliveries.NextAttemptAt != nil {
			l.Next = *r.Deliveries.NextAttemptAt
		}
		if r.LastError != nil && r.Dispatch != report.DispatchDone {
			l.LastError = *r.LastError
		}
		p.Rows = append(p.Rows, l)
	}
	return a.render(c, http.StatusOK, views.Outbox(p))
}

// eventHref is where an event about an order is shown with its deliveries: its block on the
// order's page.
func eventHref(order, event string) string { return "/admin/orders/" + order + "#" + event }

// dispatchState says in words where an event's dispatch is, and the class it is shown
// with.
func dispatchState(state string) (string, string) {
	switch state {
	case report.DispatchDone:
		return "dispatched", "applied"
	case report.DispatchWaiting:
		return "waiting", "stale"
	case report.DispatchRetrying:
		return "failed, will retry", "ignored"
	default: // discarded
		return state + ": not dispatched", "ignored"
	}
}
