package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

var windows = map[string]time.Duration{"hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour}

// chartBuckets splits each window into bars a whole number of minutes wide (3 min, 1 h,
// 6 h), so that the chart is read from the per-minute counts.
var chartBuckets = map[string]int{"hour": 20, "day": 24, "week": 28}

func (a *console) overview(c *gin.Context) error {
	window := c.DefaultQuery("window", "day")
	span, ok := windows[window]
	if !ok {
		window, span = "day", windows["day"]
	}
	ctx := c.Request.Context()
	to := a.Now()
	from := to.Add(-span)
	counts, err := report.EventCounts(ctx, a.DB, from, to, 0)
	if err != nil {
		return err
	}
	attention, err := report.NeedsAttention(ctx, a.DB)
	if err != nil {
		return err
	}
	// The chart ends with the current minute, so that its bars start on whole minutes.
	end := to.Truncate(time.Minute).Add(time.Minute)
	rate, err := report.ReplayRate(ctx, a.DB, end.Add(-span), end, chartBuckets[window])
	if err != nil {
		return err
	}
	o := views.Overview{Nav: nav(c, "Overview"), Window: window}
	o.Stats = []views.Stat{
		{Label: "keyed requests", Value: counts[report.CountRequests]},
		{Label: "first executions", Value: counts[checkout.EventCreated]},
		{Label: "replays", Value: counts[checkout.EventReplayed]},
		{Label: "conflicts", Value: counts[checkout.EventReusedConflict]},
		{Label: "in-flight rejections", Value: counts[checkout.EventInUseRejected]},
		{Label: "expirations", Value: counts[checkout.EventExpired]},
		{Label: "late retries", Value: counts[checkout.EventLateRetry]},
		{Label: "keys needing attention", Value: attention, Href: "/admin/keys?state=needs_attention", Alert: attention > 0},
	}
	o.Rate = "0%"
	if n := counts[report.CountRequests]; n > 0 {
		o.Rate = fmt.Sprintf("%.1f%%", 100*float64(counts[checkout.EventReplayed])/float64(n))
	}
	o.Bars, o.BarW = chartBars(rate, views.ZoneOf(c.Request.Context()))
	return a.render(c, http.StatusOK, views.OverviewPage(o))
}

// chartBars lays the replay chart out: per bucket, first executions under replays, scaled
// to the tallest bucket, in a 600×150 drawing area.
func chartBars(rate []report.RateBucket, loc *time.Location) ([]views.Bar, int) {
	if len(rate) == 0 {
		return nil, 0
	}
	var peak int64 = 1
	for _, b := range rate {
		peak = max(peak, b.Created+b.Replayed)
	}
	step := 600 / len(rate)
	w := max(step-2, 1)
	bars := make([]views.Bar, len(rate))
	for i, b := range rate {
		ch := int(140 * b.Created / peak)
		rh := int(140 * b.Replayed / peak)
		bars[i] = views.Bar{
			Label: b.Start.In(loc).Format("Jan 2 15:04 ") + loc.String(), X: i * step,
			CreatedY: 150 - ch, CreatedH: ch, ReplayedY: 150 - ch - rh, ReplayedH: rh,
			Created: b.Created, Replayed: b.Replayed,
		}
	}
	return bars, w
}

func (a *console) keys(c *gin.Context) error {
	f := queryFilter(c)
	p := views.KeysPage{Nav: nav(c, "Keys"), Filter: f}
	kf, err := a.keyFilter(c.Request.Context(), f, views.ZoneOf(c.Request.Context()))
	if err != nil {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.KeysList(p))
	}
	rows, next, err := report.ListKeys(c.Request.Context(), a.DB, kf, report.Page{After: c.Query("after")})
	if errors.Is(err, report.ErrInvalidQuery) {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.KeysList(p))
	}
	if err != nil {
		return err
	}
	for _, r := range rows {
		p.Rows = append(p.Rows, keyLine(r))
	}
	p.Next = nextHref(c, "/admin/keys", "after", next)
	return a.render(c, http.StatusOK, views.KeysList(p))
}

// queryFilter reads the filter form of the key, replay and conflict lists.
func queryFilter(c *gin.Context) views.KeyFilter {
	return views.KeyFilter{Key: c.Query("key"), Client: c.Query("client"), Customer: c.Query("customer"),
		Order: c.Query("order"), State: c.Query("state"), From: c.Query("from"), To: c.Query("to")}
}

// keyLine is a key as the console's key lists show it.
func keyLine(r report.KeyRow) views.KeyLine {
	line := views.KeyLine{Client: r.ClientName, Key: r.Key, State: r.State, Method: r.Method, Path: r.Path,
		Href: keyHref(r.ClientID, r.Key), Replays: r.Replays, Created: r.CreatedAt, Expires: r.ExpiresAt}
	if r.OrderPublicID != nil {
		line.Order = *r.OrderPublicID
		if r.OrderID == nil {
			line.Order += " (refund)"
		}
	}
	if r.ResponseStatus != nil {
		line.Status = strconv.Itoa(*r.ResponseStatus)
	}
	return line
}

func keyHref(clientID int64, key string) string {
	return "/admin/keys/" + strconv.FormatInt(clientID, 10) + "/" + url.PathEscape(key)
}

// keyFilter turns the form into a query filter, refusing what cannot be a value. The order
// is given by its public id, and looked up; times are read in the operator's zone loc.
func (a *console) keyFilter(ctx context.Context, f views.KeyFilter, loc *time.Location) (report.KeyFilter, error) {
	kf := report.KeyFilter{Key: f.Key, CustomerID: f.Customer, State: f.State}
	var err error
	if f.Client != "" {
		if kf.ClientID, err = strconv.ParseInt(f.Client, 10, 64); err != nil {
			return kf, errors.New("client id must be a number")
		}
	}
	if f.Order != "" {
		kf.OrderID, err = report.OrderIDOf(ctx, a.DB, f.Order)
		if errors.Is(err, checkout.ErrOrderNotFound) {
			return kf, errors.New("order must be the id of an order, like ord_ and 32 hex digits")
		}
		if err != nil {
			return kf, err
		}
	}
	if kf.From, err = formTime(f.From, loc); err != nil {
		return kf, err
	}
	if kf.To, err = formTime(f.To, loc); err != nil {
		return kf, err
	}
	return kf, nil
}

// formTime reads a time field of a search form (datetime-local, with or without seconds)
// in the operator's zone loc, the zone every time on the page is shown in; "" is the zero
// time.
func formTime(in string, loc *time.Location) (time.Time, error) {
	if in == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if v, err := time.ParseInLocation(layout, in, loc); err == nil {
			return v.UTC(), nil
		}
	}
	return time.Time{}, errors.New("times must look like 2026-12-02T14:00, in " + loc.String())
}

func (a *console) key(c *gin.Context) error {
	d, err := a.keyParams(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	events, err := report.KeyTimeline(ctx, a.DB, d.ClientID, d.Key)
	if err != nil {
		return err
	}
	v := views.KeyDetail{Nav: nav(c, "Keys"), Key: d.Key, State: d.State}
	v.Fields = []views.Field{
		field("Client", fmt.Sprintf("%s (%d)", d.ClientName, d.ClientID)),
		field("Request", d.Method+" "+d.Path),
		field("Fingerprint", d.Fingerprint),
		field("Recovery point", d.RecoveryPoint),
		{Label: "First seen", At: d.CreatedAt},
		{Label: "Expires", At: d.ExpiresAt},
		field("Replays", strconv.FormatInt(d.Replays, 10)),
	}
	if d.AttentionReason != "" {
		v.Fields = append(v.Fields, field("Needs attention", d.AttentionReason))
	}
	if d.Tombstone != nil {
		v.Fields = append(v.Fields, views.Field{Label: "Refused until", At: d.Tombstone.ForgetAt})
	}
	if o := d.Order; o != nil {
		v.Order = []views.Field{
			{Label: "Order", Value: fmt.Sprintf("%s (%s)", o.PublicID, o.Status), Href: orderHref(o.PublicID)},
			field("Amount", fmt.Sprintf("%s (refunded %s)", checkout.FormatAmount(o.Amount, o.Currency), checkout.FormatAmount(o.RefundedAmount, o.Currency))),
			field("Customer", o.CustomerID+" "+o.CustomerEmail),
			field("Items", string(o.Items)),
		}
		if p := o.Payment; p != nil {
			v.Order = append(v.Order, field("Charge", fmt.Sprintf("%s %s %s ••%s %s", p.ChargeID, p.Status, p.CardBrand, p.CardLast4, p.DeclineCode)))
		}
	}
	for _, r := range d.Refunds {
		v.Refunds = append(v.Refunds, []views.Field{
			field("Refund", fmt.Sprintf("%s (%s)", r.PublicID, r.Status)),
			field("Amount", fmt.Sprintf("%d %s", r.Amount, r.Currency)),
			field("Reason", r.Reason),
			field("Key", r.Key),
		})
	}
	if len(d.ResponseBody) > 0 {
		var pretty bytes.Buffer
		if json.Indent(&pretty, d.ResponseBody, "", "  ") == nil {
			v.Response = pretty.String()
		} else {
			v.Response = string(d.ResponseBody)
		}
	}
	v.Timeline = timelineEntries(events)
	if v.Actions, v.Audit, err = a.keyActions(c, d); err != nil {
		return err
	}
	return a.render(c, http.StatusOK, views.KeyPage(v))
}

// timelineEntries shows a key's events: who sent each request, and what it was answered.
func timelineEntries(events []report.EventRow) []views.TimelineEntry {
	var out []views.TimelineEntry
	for _, e := range events {
		t := views.TimelineEntry{At: e.At, Kind: e.Kind, Request: e.RequestID, Address: e.RemoteAddr, Device: e.UserAgent, Detail: string(e.Detail)}
		if e.Status != nil {
			t.Status = strconv.Itoa(*e.Status)
		}
		if e.Fingerprint != "" {
			t.Detail += " fingerprint " + e.Fingerprint
		}
		out = append(out, t)
	}
	return out
}

func field(label, value string) views.Field { return views.Field{Label: label, Value: value} }
