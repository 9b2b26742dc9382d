package admin

import (
	"fmt"
	"net/http"
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

// overview is the console's home: what keyed traffic did in the last hour, day or week,
// and the keys that need an operator.
func (a *console) overview(c *gin.Context) error {
	window := c.DefaultQuery("window", "day")
	span, ok := windows[window]
	if !ok {
		window, span = "day", windows["day"]
	}
	ctx := c.Request.Context()
	to := a.Now()
	from := to.Add(-span)
	counts, err := report.HistoryCounts(ctx, a.Read, from, to, 0)
	if err != nil {
		return err
	}
	attention, err := report.NeedsAttention(ctx, a.Read)
	if err != nil {
		return err
	}
	disputes, err := report.CountOpenDisputes(ctx, a.Read)
	if err != nil {
		return err
	}
	comps, err := report.CountCompensations(ctx, a.Read)
	if err != nil {
		return err
	}
	// The chart ends with the current minute, so that its bars start on whole minutes.
	end := to.Truncate(time.Minute).Add(time.Minute)
	rate, err := report.ReplayRate(ctx, a.Read, end.Add(-span), end, chartBuckets[window])
	if err != nil {
		return err
	}
	o := views.Overview{Nav: nav(c, "Overview"), Window: window}
	o.Stats = []views.Stat{
		{Label: "keyed requests", Value: counts[report.CountRequests]},
		{Label: "first executions", Value: counts[checkout.KindCreated]},
		{Label: "replays", Value: counts[checkout.KindReplayed]},
		{Label: "conflicts", Value: counts[checkout.KindReusedConflict]},
		{Label: "in-flight rejections", Value: counts[checkout.KindInUseRejected]},
		{Label: "expirations", Value: counts[checkout.KindExpired]},
		{Label: "late retries", Value: counts[checkout.KindLateRetry]},
		{Label: "keys needing attention", Value: attention, Href: "/admin/keys?state=needs_attention", Alert: attention > 0},
		{Label: "open disputes", Value: disputes, Href: "/admin/disputes?status=open", Alert: disputes > 0},
		{Label: "compensations watching", Value: comps.Watching, Href: "/admin/compensations?state=watching"},
		{Label: "compensations held (disputed)", Value: comps.Disputed, Href: "/admin/compensations?state=disputed", Alert: comps.Disputed > 0},
		{Label: "compensations refunded", Value: comps.Refunded, Href: "/admin/compensations?state=refunded"},
	}
	o.Rate = "0%"
	if n := counts[report.CountRequests]; n > 0 {
		o.Rate = fmt.Sprintf("%.1f%%", 100*float64(counts[checkout.KindReplayed])/float64(n))
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
