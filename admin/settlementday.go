package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// settlementHref is a settled day's page: the client's id and the day, YYYY-MM-DD.
func settlementHref(clientID int64, day string) string {
	return "/admin/settlements/" + itoa(clientID) + "/" + day
}

// settledDay reads the settlement the route names (:client, :day), one row per currency.
func (a *console) settledDay(c *gin.Context) ([]report.SettlementRow, error) {
	client, err := strconv.ParseInt(c.Param("client"), 10, 64)
	day, derr := calendar.Parse(c.Param("day"))
	if err != nil || client < 1 || derr != nil {
		return nil, notFound("There is no such settlement: its address is /admin/settlements/{client id}/{day, YYYY-MM-DD}.")
	}
	rows, err := report.Settlements(c.Request.Context(), a.Read,
		report.SettlementFilter{ClientID: client, From: day.String(), To: day.String()}, report.SettlementLimit)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, notFound(fmt.Sprintf("Client %d has no settlement of %s: the day may not be over in its time zone, or not settled yet.",
			client, day))
	}
	return rows, nil
}

// The stored totals of a settlement, in the order the page shows them.
var settlementTotals = []struct{ name, title string }{
	{"captured", "Captured"}, {"refunded", "Refunded"}, {"disputed", "Disputed"}, {"compensated", "Compensated"},
}

// totalOf names the total a movement of kind adds to (checkout/settlement's create).
func totalOf(kind string) string {
	switch kind {
	case "capture", "installment":
		return "captured"
	case "refund":
		return "refunded"
	case "dispute":
		return "disputed"
	case "compensation":
		return "compensated"
	}
	return kind
}

// figure is an amount and how many movements make it.
type figure struct {
	amount int64
	count  int
}

func (f figure) format(currency string) string {
	n := strconv.Itoa(f.count) + " movements"
	if f.count == 1 {
		n = "1 movement"
	}
	return money.Format(f.amount, currency) + " (" + n + ")"
}

// settlementDay is a settled day's page: its totals, each with every movement it adds up
// and whether their sum is the stored figure; the adjustments it counted; the movements of
// the day that came after it was settled, with the settlement that counted them; and the
// orders of the day with that day's movements.
func (a *console) settlementDay(c *gin.Context) error {
	ctx := c.Request.Context()
	rows, err := a.settledDay(c)
	if err != nil {
		return err
	}
	s := rows[0]
	loc, err := clients.Location(s.TimeZone)
	if err != nil {
		return fmt.Errorf("settlement %d: %w", s.ID, err)
	}
	sums, err := report.SettlementMovementSums(ctx, a.Read, s.ID, s.ClientID, s.Day)
	if err != nil {
		return err
	}
	ms, err := report.SettlementMovements(ctx, a.Read, s.ID, s.ClientID, s.Day, report.SettlementMovementLimit)
	if err != nil {
		return err
	}
	const local = "2006-01-02 15:04:05"
	p := views.SettlementDayPage{Nav: nav(c, "Settlements"), Day: s.Day, Client: fmt.Sprintf("%s (%d)", s.ClientName, s.ClientID),
		Loc: loc, WindowLocal: s.StartsAt.In(loc).Format(local) + " to " + s.EndsAt.In(loc).Format(local),
		Hours:    strconv.FormatFloat(s.EndsAt.Sub(s.StartsAt).Hours(), 'f', -1, 64),
		StartsAt: s.StartsAt, EndsAt: s.EndsAt, SettledAt: s.SettledAt, Process: s.Process,
		ExportHref: settlementHref(s.ClientID, s.Day) + "/movements.csv", BackHref: "/admin/settlements?client=" + itoa(s.ClientID)}

	// The stored figures and the sums of the movements, by currency and total.
	stored, summed := map[string]map[string]figure{}, map[string]map[string]figure{}
	add := func(m map[string]map[string]figure, cur, total string, f figure) {
		if m[cur] == nil {
			m[cur] = map[string]figure{}
		}
		g := m[cur][total]
		m[cur][total] = figure{g.amount + f.amount, g.count + f.count}
	}
	for _, r := range rows {
		if r.Currency == nil {
			continue
		}
		cur := *r.Currency
		add(stored, cur, "captured", figure{r.CapturedAmount, r.CapturedCount})
		add(stored, cur, "refunded", figure{r.RefundedAmount, r.RefundedCount})
		add(stored, cur, "disputed", figure{r.DisputedAmount, r.DisputedCount})
		add(stored, cur, "compensated", figure{r.CompensatedAmount, r.CompensatedCount})
		st := stored[cur]
		p.Totals = append(p.Totals, views.SettlementTotalLine{Currency: cur,
			Captured: st["captured"].format(cur), Refunded: st["refunded"].format(cur),
			Disputed: st["disputed"].format(cur), Compensated: st["compensated"].format(cur),
			Net: money.Format(st["captured"].amount-st["refunded"].amount-st["disputed"].amount-st["compensated"].amount, cur)})
	}
	all := 0
	for _, sm := range sums {
		all += sm.Count
		if sm.Part == report.MovementOwn {
			add(summed, sm.Currency, totalOf(sm.Kind), figure{sm.Amount, sm.Count})
		}
	}
	var currencies []string
	for cur := range stored {
		currencies = append(currencies, cur)
	}
	for cur := range summed {
		if stored[cur] == nil {
			currencies = append(currencies, cur)
		}
	}
	slices.Sort(currencies)
	for _, cur := range currencies {
		for _, t := range settlementTotals {
			st, sm := stored[cur][t.name], summed[cur][t.name]
			if st == (figure{}) && sm == (figure{}) {
				continue
			}
			g := views.MovementGroup{ID: t.name + "-" + strings.ToLower(cur), Title: t.title + " in " + cur,
				Stored: st.format(cur), Sum: sm.format(cur), Agrees: st == sm}
			if !g.Agrees {
				p.Mismatches = append(p.Mismatches, fmt.Sprintf("%s: stored %s, but its movements add up to %s.", g.Title, g.Stored, g.Sum))
			}
			for _, m := range ms {
				if m.Part == report.MovementOwn && m.Currency == cur && totalOf(m.Kind) == t.name {
					g.Lines = append(g.Lines, movementLine(m))
				}
			}
			p.Groups = append(p.Groups, g)
		}
	}

	// Adjustments, late movements, and the orders of the day (its own movements and its late
	// ones, each order under its first movement's time).
	orders := map[string]*views.DayOrder{}
	var orderIDs []string
	first := map[string]time.Time{}
	for _, m := range ms {
		l := movementLine(m)
		switch m.Part {
		case report.MovementAdjustment:
			l.Day = views.Link{Label: m.Day, Href: settlementHref(s.ClientID, m.Day)}
			p.Adjustments = append(p.Adjustments, l)
			continue
		case report.MovementLate:
			l.CountedBy = views.Link{Label: "settlement of " + m.CountedOn, Href: settlementHref(s.ClientID, m.CountedOn)}
			p.Late = append(p.Late, l)
		}
		if m.OrderPublicID == nil {
			continue
		}
		id := *m.OrderPublicID
		o := orders[id]
		if o == nil {
			o = &views.DayOrder{Order: l.Order, StatusNow: l.OrderStatus}
			orders[id], first[id] = o, m.OccurredAt
			orderIDs = append(orderIDs, id)
		}
		if m.OccurredAt.Before(first[id]) {
			first[id] = m.OccurredAt
		}
		o.Movements = append(o.Movements, l)
	}
	slices.SortStableFunc(orderIDs, func(x, y string) int { return first[x].Compare(first[y]) })
	for _, id := range orderIDs {
		o := orders[id]
		slices.SortStableFunc(o.Movements, func(x, y views.SettledMovement) int { return x.At.Compare(y.At) })
		p.Orders = append(p.Orders, *o)
	}
	if all > len(ms) {
		p.Truncated = fmt.Sprintf("This page lists the first %d of the day's %d movements (and its orders from them); the sums count every one, and the CSV export has them all.",
			len(ms), all)
	}
	return a.render(c, http.StatusOK, views.SettlementDay(p))
}

// movementLine lays a movement out for the page.
func movementLine(m report.SettlementMovement) views.SettledMovement {
	l := views.SettledMovement{Kind: m.Kind, At: m.OccurredAt, Amount: money.Format(m.Amount, m.Currency)}
	if m.OrderPublicID != nil {
		l.Order = views.Link{Label: *m.OrderPublicID, Href: orderHref(*m.OrderPublicID)}
	}
	if m.OrderStatus != nil {
		l.OrderStatus = statusWords(*m.OrderStatus)
	}
	return l
}

// settlementMovementsCSV exports a settled day's movements, the page's rows with the same
// columns, streamed as they are read: times RFC 3339 in UTC, as in every export (the day
// column names the client's day), amounts in minor units with their currency.
func (a *console) settlementMovementsCSV(c *gin.Context) error {
	ctx := c.Request.Context()
	rows, err := a.settledDay(c)
	if err != nil {
		return err
	}
	s := rows[0]
	header := []string{"part", "total", "kind", "source_id", "day", "occurred_at_utc", "amount", "currency", "order",
		"order_status_now", "counted_on", "settlement_id"}
	return streamCSV(c, fmt.Sprintf("settlement-%d-%s.csv", s.ClientID, s.Day), header, func(emit func([]string) error) error {
		return report.EachSettlementMovement(ctx, a.Read, s.ID, s.ClientID, s.Day, func(m report.SettlementMovement) error {
			order, status := "", ""
			if m.OrderPublicID != nil {
				order = *m.OrderPublicID
			}
			if m.OrderStatus != nil {
				status = *m.OrderStatus
			}
			return emit([]string{m.Part, totalOf(m.Kind), m.Kind, itoa(m.SourceID), m.Day,
				csvTime(m.OccurredAt), itoa(m.Amount), m.Currency, order, status, m.CountedOn,
				itoa(m.CountedBy)})
		})
	})
}
