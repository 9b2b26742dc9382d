package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/views"
)

// searchTitles names each kind of match on the results page.
var searchTitles = map[string]string{
	report.SearchOrder: "Orders", report.SearchKey: "Idempotency keys", report.SearchRegisterSale: "Register sales",
	report.SearchCharge: "Charges", report.SearchRefund: "Refunds", report.SearchProviderEvent: "Provider events",
	report.SearchCustomer: "Customers", report.SearchCard: "Cards (last 4 digits)", report.SearchAmount: "Amounts",
}

// inboxEventHref is a provider event's line in the inbox, found by the inbox's search.
func inboxEventHref(eventID string) string { return "/admin/inbox?q=" + url.QueryEscape(eventID) }

// search is the console's one search box: when everything that matched is on one page (an
// order, or a provider event of no order) it sends the operator there (303); otherwise it
// lists the matches by kind, each linking its page.
func (a *console) search(c *gin.Context) error {
	q := strings.TrimSpace(c.Query("q"))
	n := nav(c, "")
	n.Search = pgtext.Clean(q, report.MaxSearchLength)
	p := views.SearchPage{Nav: n, Query: n.Search}
	switch {
	case q == "":
		return a.render(c, http.StatusOK, views.Search(p))
	case len(q) > report.MaxSearchLength:
		p.Note = fmt.Sprintf("Nothing is looked for: the search is longer than any id tekrar keeps (%d characters).", report.MaxSearchLength)
		return a.render(c, http.StatusOK, views.Search(p))
	case !pgtext.Valid(q):
		p.Note = "Nothing is looked for: the search holds characters no id or e-mail can hold."
		return a.render(c, http.StatusOK, views.Search(p))
	}
	groups, err := report.Search(c.Request.Context(), a.Read, q)
	if err != nil {
		return err
	}
	targets := map[string]bool{}
	for _, g := range groups {
		vg := views.SearchGroup{Kind: strings.ReplaceAll(g.Kind, " ", "-"), Title: searchTitles[g.Kind], More: g.More, Limit: report.SearchLimit}
		if g.More {
			vg.MoreHref = moreHref(g.Kind, q)
		}
		for _, h := range g.Hits {
			l := views.SearchLine{Match: h.Match, Note: h.Note, Status: h.Status, At: h.At}
			if h.OrderPublicID != "" {
				l.Order = views.Link{Label: h.OrderPublicID, Href: orderHref(h.OrderPublicID)}
				l.Href = l.Order.Href
				l.Client = fmt.Sprintf("%s (%d)", h.ClientName, h.ClientID)
				l.Amount = money.Format(h.Amount, h.Currency)
			}
			if h.EventID != "" {
				l.Event = views.Link{Label: h.EventID, Href: inboxEventHref(h.EventID)}
				if l.Href == "" {
					l.Href = l.Event.Href
				}
			}
			targets[l.Href] = true
			vg.Lines = append(vg.Lines, l)
		}
		p.Groups = append(p.Groups, vg)
	}
	if len(targets) == 1 && !anyMore(groups) {
		for href := range targets {
			c.Redirect(http.StatusSeeOther, href)
		}
		return nil
	}
	return a.render(c, http.StatusOK, views.Search(p))
}

func anyMore(groups []report.SearchGroup) bool {
	for _, g := range groups {
		if g.More {
			return true
		}
	}
	return false
}

// moreHref is the orders search that narrows a kind with too many matches to list, for the
// kinds it has a field of the same meaning for (a card's last four, an amount as a receipt
// writes it); a customer's prefix has none (the orders search takes whole ids and e-mails).
func moreHref(kind, q string) string {
	switch kind {
	case report.SearchCard:
		return "/admin/orders?last4=" + url.QueryEscape(q)
	case report.SearchAmount:
		// The orders search reads the amount as the box does when it has decimals; a whole
		// number there is in major units, so only those are handed on.
		if amount, currency, ok := strings.Cut(q, " "); ok && money.ValidCurrency(strings.ToUpper(currency)) {
			return "/admin/orders?amount=" + url.QueryEscape(amount) + "&currency=" + url.QueryEscape(strings.ToUpper(currency))
		}
		if strings.ContainsAny(q, ".,") && !strings.ContainsAny(q, " ") {
			return "/admin/orders?amount=" + url.QueryEscape(q)
		}
	}
	return ""
}
