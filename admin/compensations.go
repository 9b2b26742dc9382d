package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// compensationStates are the compensations list's filter values, the default first.
var compensationStates = []string{report.StatusAll, checkout.CompensationWatching, checkout.CompensationDisputed,
	checkout.CompensationRefunded, checkout.CompensationNoCharge, checkout.CompensationAlreadyRefunded,
	checkout.CompensationDisputeLost}

// compensationHref links an order's compensation in the list, at its row.
func compensationHref(orderPublicID string, id int64) string {
	return "/admin/compensations?order=" + url.QueryEscape(orderPublicID) + "#" + compensationAnchor(id)
}

// compensationAnchor is the id of a compensation's row in the list.
func compensationAnchor(id int64) string { return "compensation-" + strconv.FormatInt(id, 10) }

// compensations lists every refund tekrar owes, or made, for a charge it gave up on: those
// still watching first (?state=, ?client=, ?order= narrow it).
func (a *console) compensations(c *gin.Context) error {
	ctx := c.Request.Context()
	f := caseFilterForm(c, "state", report.StatusAll)
	p := views.CompensationsPage{Nav: nav(c, "Compensations"), Filter: f, States: compensationStates}
	counts, err := report.CountCompensations(ctx, a.Read)
	if err != nil {
		return err
	}
	p.Watching, p.Refunded, p.NoCharge = counts.Watching, counts.Refunded, counts.NoCharge
	p.AlreadyRefunded, p.Disputed, p.DisputeLost = counts.AlreadyRefunded, counts.Disputed, counts.DisputeLost
	client, order, err := a.caseNarrowing(ctx, f)
	if err == nil {
		var rows []report.CompensationRow
		var next report.Page
		rows, next, err = report.ListCompensations(ctx, a.Read, report.CompensationFilter{State: f.Status, ClientID: client, OrderID: order},
			report.Page{After: c.Query("after")})
		for _, r := range rows {
			p.Rows = append(p.Rows, compensationLine(r))
		}
		p.Next = nextHref(c, "/admin/compensations", "after", next)
	}
	if err != nil {
		if !shownBesideForm(err) {
			return err
		}
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.CompensationsList(p))
	}
	return a.render(c, http.StatusOK, views.CompensationsList(p))
}

// compensationLine lays a compensation out for the list.
func compensationLine(r report.CompensationRow) views.CompensationLine {
	l := views.CompensationLine{Anchor: compensationAnchor(r.ID), State: r.State, Reason: r.Reason, ChargeKey: r.ChargeKey,
		Attempts: r.Attempts, WatchUntil: r.WatchUntil, Created: r.CreatedAt}
	if r.State == checkout.CompensationWatching || r.State == checkout.CompensationDisputed {
		l.NextAttempt = r.NextAttemptAt
	}
	if r.SettledAt != nil {
		l.Settled = *r.SettledAt
	}
	if r.OrderPublicID != nil {
		l.Order = views.Link{Label: *r.OrderPublicID, Href: orderHref(*r.OrderPublicID)}
	}
	if r.ClientID != nil {
		name := ""
		if r.ClientName != nil {
			name = *r.ClientName
		}
		l.Client = fmt.Sprintf("%s (%d)", name, *r.ClientID)
	}
	if r.ChargeID != nil {
		l.Charge = views.Link{Label: *r.ChargeID, Href: "/admin/inbox?charge=" + url.QueryEscape(*r.ChargeID)}
	}
	if r.RefundID != nil {
		l.Refund = *r.RefundID
	}
	if r.Amount != nil && r.Currency != nil {
		l.Amount = money.Format(*r.Amount, *r.Currency)
	}
	if r.LastError != nil {
		l.LastError = *r.LastError
	}
	return l
}
