package admin

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/views"
)

// inbox lists the payment provider's events as tekrar received them (?charge= narrows it to
// one charge's events; ?q= finds an event by its id, the events of a type or of an order), and the dead letters: signed events it could not store (?view=dead
// lists only those).
func (a *console) inbox(c *gin.Context) error {
	charge, q := strings.TrimSpace(c.Query("charge")), strings.TrimSpace(c.Query("q"))
	rows, counts, err := report.Inbox(c.Request.Context(), a.Read, charge)
	if err != nil {
		return err
	}
	if q != "" {
		// The inbox's search (an event id, a type, an order's charges) replaces the list.
		if rows, err = report.SearchInbox(c.Request.Context(), a.Read, q); err != nil {
			return err
		}
	}
	now := a.Now()
	refusals, err := report.Refusals(c.Request.Context(), a.Read, now)
	if err != nil {
		return err
	}
	dead, waiting, err := report.DeadLetters(c.Request.Context(), a.Read)
	if err != nil {
		return err
	}
	p := views.InboxPage{Nav: nav(c, "Inbox"), Charge: charge, Query: pgtext.Clean(q, report.MaxSearchLength), Events: counts.Events, Applied: counts.Applied,
		Stale: counts.Stale, Ignored: counts.Ignored, Duplicates: counts.Duplicates,
		DeadOnly: c.Query("view") == "dead", DeadLetters: deadLetterLines(c, dead), DeadWaiting: waiting,
		Export: inboxExportHref(charge, q)}
	for _, r := range refusals.ByReason {
		p.Refusals = append(p.Refusals, views.InboxRefusalLine{Reason: r.Reason, LastHour: r.LastHour, LastDay: r.LastDay})
		if r.Reason != inbox.RefusalApplyFailed && r.LastHour > 0 {
			p.SignatureFailedLastHour = true
		}
		if r.Reason == inbox.RefusalApplyFailed && r.LastHour > 0 {
			p.ApplyFailedLastHour = true
		}
	}
	if l := refusals.Last; l != nil {
		p.LastRefusal = &views.InboxLastRefusal{At: l.At, Reason: l.Reason, Remote: l.Remote}
	}
	for _, r := range rows {
		l := views.InboxLine{ID: r.ID, Type: r.Type, Outcome: r.Outcome, Deliveries: r.Deliveries,
			Received: r.ReceivedAt, Last: r.LastDeliveryAt}
		if r.ChargeID != nil {
			l.Charge = views.Link{Label: *r.ChargeID, Href: "/admin/inbox?charge=" + url.QueryEscape(*r.ChargeID)}
		}
		if r.OrderPublicID != nil {
			l.Order = views.Link{Label: *r.OrderPublicID, Href: orderHref(*r.OrderPublicID)}
		}
		if r.Sequence != nil {
			l.Sequence = strconv.Itoa(*r.Sequence)
		}
		p.Rows = append(p.Rows, l)
	}
	return a.render(c, http.StatusOK, views.Inbox(p))
}

// inboxExportHref is the inbox's CSV export of the events its filter selects: a search's
// or a charge's, or every event (the page shows the newest 200).
func inboxExportHref(charge, q string) string {
	v := url.Values{}
	if q != "" {
		v.Set("q", q)
	} else if charge != "" {
		v.Set("charge", charge)
	}
	if len(v) == 0 {
		return "/admin/inbox.csv"
	}
	return "/admin/inbox.csv?" + v.Encode()
}
