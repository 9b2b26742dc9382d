package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// settlements lists the nightly settlements, newest day first, one line per currency, and
// the adjustments they counted (?client=, ?from= and ?to= days narrow both).
func (a *console) settlements(c *gin.Context) error {
	ctx := c.Request.Context()
	form, f, err := settlementFilter(c)
	p := views.SettlementsPage{Nav: nav(c, "Settlements"), Filter: form, ExportQuery: exportQuery(form)}
	if err != nil {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.Settlements(p))
	}
	rows, err := report.Settlements(ctx, a.Read, f, report.SettlementLimit)
	if err != nil {
		return err
	}
	zone := views.ZoneOf(ctx)
	for _, r := range rows {
		p.Rows = append(p.Rows, settlementLine(r, zone))
	}
	adjs, err := report.Adjustments(ctx, a.Read, f, report.SettlementLimit)
	if err != nil {
		return err
	}
	for _, r := range adjs {
		l := views.AdjustmentLine{SettledOn: views.Link{Label: r.SettledDay, Href: settlementHref(r.ClientID, r.SettledDay)},
			Client: fmt.Sprintf("%s (%d)", r.ClientName, r.ClientID), Day: views.Link{Label: r.Day, Href: settlementHref(r.ClientID, r.Day)},
			Kind: r.Kind, Amount: money.Format(r.Amount, r.Currency), Occurred: r.OccurredAt}
		if r.OrderPublicID != nil {
			l.Order = views.Link{Label: *r.OrderPublicID, Href: orderHref(*r.OrderPublicID)}
		}
		p.Adjustments = append(p.Adjustments, l)
	}
	return a.render(c, http.StatusOK, views.Settlements(p))
}

// settlementsCSV exports every settlement the filter selects, one line per currency,
// streamed as read.
func (a *console) settlementsCSV(c *gin.Context) error {
	_, f, err := settlementFilter(c)
	if err != nil {
		return badRequest(err.Error())
	}
	header := []string{"day", "client_id", "client", "time_zone", "starts_at_utc", "ends_at_utc",
		"currency", "captured_amount", "captured_count", "refunded_amount", "refunded_count", "disputed_amount",
		"disputed_count", "compensated_amount", "compensated_count", "adjustments", "settled_at_utc", "settlement_id"}
	return streamCSV(c, "settlements.csv", header, func(emit func([]string) error) error {
		return report.EachSettlement(c.Request.Context(), a.Read, f, func(r report.SettlementRow) error {
			cur := ""
			if r.Currency != nil {
				cur = *r.Currency
			}
			return emit([]string{r.Day, itoa(r.ClientID), r.ClientName, r.TimeZone, csvTime(r.StartsAt), csvTime(r.EndsAt), cur,
				itoa(r.CapturedAmount), strconv.Itoa(r.CapturedCount), itoa(r.RefundedAmount), strconv.Itoa(r.RefundedCount),
				itoa(r.DisputedAmount), strconv.Itoa(r.DisputedCount), itoa(r.CompensatedAmount), strconv.Itoa(r.CompensatedCount),
				strconv.Itoa(r.Adjustments), csvTime(r.SettledAt), itoa(r.ID)})
		})
	})
}

// adjustmentsCSV exports every adjustment counted by the settlements the filter selects,
// streamed as read.
func (a *console) adjustmentsCSV(c *gin.Context) error {
	_, f, err := settlementFilter(c)
	if err != nil {
		return badRequest(err.Error())
	}
	header := []string{"settled_on", "settlement_id", "client_id", "client", "day", "kind",
		"source_id", "occurred_at_utc", "amount", "currency", "order"}
	return streamCSV(c, "adjustments.csv", header, func(emit func([]string) error) error {
		return report.EachAdjustment(c.Request.Context(), a.Read, f, func(r report.AdjustmentRow) error {
			order := ""
			if r.OrderPublicID != nil {
				order = *r.OrderPublicID
			}
			return emit([]string{r.SettledDay, itoa(r.SettlementID), itoa(r.ClientID), r.ClientName, r.Day, r.Kind,
				itoa(r.SourceID), csvTime(r.OccurredAt), itoa(r.Amount), r.Currency, order})
		})
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// settlementFilter reads the page's filter: a client id and days written YYYY-MM-DD.
func settlementFilter(c *gin.Context) (views.SettlementFilter, report.SettlementFilter, error) {
	form := views.SettlementFilter{Client: strings.TrimSpace(c.Query("client")), From: strings.TrimSpace(c.Query("from")),
		To: strings.TrimSpace(c.Query("to"))}
	var f report.SettlementFilter
	if form.Client != "" {
		id, err := strconv.ParseInt(form.Client, 10, 64)
		if err != nil || id <= 0 {
			return form, f, errors.New("client id must be a number")
		}
		f.ClientID = id
	}
	var from, to calendar.Day
	for _, d := range []struct {
		in  string
		out *string
		day *calendar.Day
	}{{form.From, &f.From, &from}, {form.To, &f.To, &to}} {
		if d.in == "" {
			continue
		}
		day, err := calendar.Parse(d.in)
		if err != nil {
			return form, f, fmt.Errorf("days must be written YYYY-MM-DD and exist: %w", err)
		}
		*d.out, *d.day = day.String(), day
	}
	if f.From != "" && f.To != "" && to.Before(from) {
		return form, f, errors.New("the first day must not be after the last")
	}
	return form, f, nil
}

// exportQuery is the filter as a query string ("" when empty), for the CSV links.
func exportQuery(f views.SettlementFilter) string {
	q := url.Values{}
	for k, v := range map[string]string{"client": f.Client, "from": f.From, "to": f.To} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// settlementLine lays a settlement's currency out; zone is the operator's, in which the
// link to the day's orders writes the day's window.
func settlementLine(r report.SettlementRow, zone *time.Location) views.SettlementLine {
	l := views.SettlementLine{Day: r.Day, Client: fmt.Sprintf("%s (%d)", r.ClientName, r.ClientID), Zone: r.TimeZone,
		Currency: "—", Adjustments: r.Adjustments, Settled: r.SettledAt,
		Window: r.StartsAt.UTC().Format(time.RFC3339) + " to " + r.EndsAt.UTC().Format(time.RFC3339) + " (UTC)"}
	figure := func(amount int64, n int) string { return "—" }
	if r.Currency != nil {
		l.Currency = *r.Currency
		figure = func(amount int64, n int) string { return fmt.Sprintf("%s (%d)", money.Format(amount, *r.Currency), n) }
	}
	l.Captured, l.Refunded = figure(r.CapturedAmount, r.CapturedCount), figure(r.RefundedAmount, r.RefundedCount)
	l.Disputed, l.Compensated = figure(r.DisputedAmount, r.DisputedCount), figure(r.CompensatedAmount, r.CompensatedCount)
	q := url.Values{}
	q.Set("client", itoa(r.ClientID))
	q.Set("from", r.StartsAt.In(zone).Format("2006-01-02T15:04:05"))
	q.Set("to", r.EndsAt.In(zone).Format("2006-01-02T15:04:05"))
	// The orders page shows each order's status now: the label says so, and the day's page
	// lists what each order did on the day.
	l.Orders = views.Link{Label: "orders (status now)", Href: "/admin/orders?" + q.Encode()}
	l.Href = settlementHref(r.ClientID, r.Day)
	return l
}
