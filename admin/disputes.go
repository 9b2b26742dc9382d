package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// disputeStatuses are the disputes queue's filter values, the default first.
var disputeStatuses = []string{report.DisputeOpen, report.DisputeWon, report.DisputeLost, report.StatusAll}

// disputesHref links the disputes of one order, all of them, at the row of dispute (the
// provider's id) when it is not "".
func disputesHref(orderPublicID, dispute string) string {
	h := "/admin/disputes?status=all&order=" + url.QueryEscape(orderPublicID)
	if dispute != "" {
		h += "#" + disputeAnchor(dispute)
	}
	return h
}

// disputeAnchor is the id of a dispute's row in the queue.
func disputeAnchor(dispute string) string { return "dispute-" + dispute }

// disputes is the queue of cardholders' disputes: the open ones first, oldest first, each
// with its order and charge (?status=, ?client=, ?order= narrow it).
func (a *console) disputes(c *gin.Context) error {
	ctx := c.Request.Context()
	f := caseFilterForm(c, "status", report.DisputeOpen)
	p := views.DisputesPage{Nav: nav(c, "Disputes"), Filter: f, Statuses: disputeStatuses}
	open, err := report.CountOpenDisputes(ctx, a.Read)
	if err != nil {
		return err
	}
	p.Open = open
	client, order, err := a.caseNarrowing(ctx, f)
	if err == nil {
		var rows []report.DisputeRow
		var next report.Page
		rows, next, err = report.ListDisputes(ctx, a.Read, report.DisputeFilter{Status: f.Status, ClientID: client, OrderID: order},
			report.Page{After: c.Query("after")})
		now := a.Now()
		for _, r := range rows {
			p.Rows = append(p.Rows, disputeLine(r, now))
		}
		p.Next = nextHref(c, "/admin/disputes", "after", next)
	}
	if err != nil {
		if !shownBesideForm(err) {
			return err
		}
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.DisputesList(p))
	}
	return a.render(c, http.StatusOK, views.DisputesList(p))
}

// disputeLine lays a dispute out for the queue; now dates an open dispute's age.
func disputeLine(r report.DisputeRow, now time.Time) views.DisputeLine {
	l := views.DisputeLine{Anchor: disputeAnchor(r.DisputeID), DisputeID: r.DisputeID, Amount: money.Format(r.Amount, r.Currency),
		Reason: r.Reason, Status: r.Status, Opened: r.OpenedAt,
		Order:  views.Link{Label: r.OrderPublicID + " (" + statusWords(r.OrderStatus) + ")", Href: orderHref(r.OrderPublicID)},
		Client: fmt.Sprintf("%s (%d)", r.ClientName, r.ClientID)}
	until := now
	if r.ClosedAt != nil {
		l.Closed, until = *r.ClosedAt, *r.ClosedAt
	}
	l.Age = ageText(until.Sub(r.OpenedAt))
	if r.ChargeID != nil {
		l.Charge = views.Link{Label: *r.ChargeID, Href: "/admin/inbox?charge=" + url.QueryEscape(*r.ChargeID)}
	}
	return l
}

// ageText is how long a case has been open, as an operator counts it: "3 d 4 h", "2 h 5 min".
func ageText(d time.Duration) string {
	if d < 48*time.Hour {
		return gapText(d)
	}
	d = d.Round(time.Hour)
	days := int(d.Hours()) / 24
	if h := int(d.Hours()) % 24; h != 0 {
		return fmt.Sprintf("%d d %d h", days, h)
	}
	return fmt.Sprintf("%d d", days)
}
