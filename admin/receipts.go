package admin

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/receipts"
	"github.com/tekrar/tekrar/views"
)

// receiptsPage lists the e-mail receipts (?client=, ?order=, ?state= narrow it): sent,
// kept for want of an SMTP server, queued, failed, or refused (over the client's bounds,
// with the reason: ?state=refused&client= is what a client was refused, newest first).
func (a *console) receiptsPage(c *gin.Context) error {
	p := views.ReceiptsPage{Nav: nav(c, "Receipts"), Client: strings.TrimSpace(c.Query("client")),
		Order: strings.TrimSpace(c.Query("order")), State: c.Query("state")}
	f := receipts.Filter{Order: p.Order}
	if p.Client != "" {
		id, err := strconv.ParseInt(p.Client, 10, 64)
		if err != nil || id <= 0 {
			return badRequest("client id must be a number")
		}
		f.ClientID = id
	}
	switch p.State {
	case "", receipts.StateKept, receipts.StateQueued, receipts.StateSent, receipts.StateFailed, receipts.StateRefused:
		f.State = p.State
	default:
		return badRequest("state must be kept, queued, sent, failed or refused")
	}
	rows, counts, err := receipts.List(c.Request.Context(), a.DB, f)
	if err != nil {
		return err
	}
	p.Kept, p.Queued, p.Sent, p.Failed, p.Refused = counts.Kept, counts.Queued, counts.Sent, counts.Failed, counts.Refused
	for _, r := range rows {
		p.Rows = append(p.Rows, receiptLine(r))
	}
	return a.render(c, http.StatusOK, views.Receipts(p))
}

func receiptLine(r receipts.Receipt) views.ReceiptLine {
	l := views.ReceiptLine{Href: "/admin/receipts/" + url.PathEscape(r.EventID), Created: r.CreatedAt,
		Client: views.Link{Label: r.ClientName, Href: "/admin/receipts?client=" + strconv.FormatInt(r.ClientID, 10)},
		Order:  views.Link{Label: r.OrderPublicID, Href: "/admin/orders/" + url.PathEscape(r.OrderPublicID)},
		Kind:   r.Kind, Recipient: r.Recipient, State: r.State, Attempts: r.Attempts}
	if r.LastError != nil {
		l.LastError = *r.LastError
	}
	if r.SentAt != nil {
		l.Sent = *r.SentAt
	}
	if r.RefusedReason != nil {
		l.Refused = *r.RefusedReason
	}
	return l
}
