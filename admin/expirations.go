package admin

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// recentSweeps is how many sweeper passes the expirations page shows.
const recentSweeps = 20

// expirations shows the keys that expire within the hour, the sweeper's recent passes
// and the late retries that came after a key had expired.
func (a *console) expirations(c *gin.Context) error {
	ctx := c.Request.Context()
	p := views.ExpirationsPage{Nav: nav(c, "Expirations")}
	status := http.StatusOK
	// invalid reports a malformed cursor of one list on the page; the others still show.
	invalid := func(err error) bool {
		if errors.Is(err, report.ErrInvalidQuery) {
			p.Error, status = err.Error(), http.StatusBadRequest
			return true
		}
		return false
	}
	now := a.Now()
	keys, next, err := report.ExpiringKeys(ctx, a.Read, now, now.Add(time.Hour), report.Page{After: c.Query("expiring_after")})
	if err != nil && !invalid(err) {
		return err
	}
	for _, r := range keys {
		p.Expiring = append(p.Expiring, keyLine(r))
	}
	p.ExpiringNext = nextHref(c, "/admin/expirations", "expiring_after", next)

	sweeps, err := report.RecentSweeps(ctx, a.Read, recentSweeps)
	if err != nil {
		return err
	}
	for _, s := range sweeps {
		p.Sweeps = append(p.Sweeps, views.SweepLine{At: s.StartedAt, Node: s.Node, Tombstoned: s.KeysTombstoned,
			Deleted: s.KeysDeleted, Forgotten: s.TombstonesForgotten, Gone: s.EventsDeleted,
			Took: s.FinishedAt.Sub(s.StartedAt).Round(time.Millisecond).String(), Error: s.Error})
	}

	late, next, err := report.ListHistory(ctx, a.Read, report.HistoryFilter{Kinds: []string{checkout.KindLateRetry}},
		report.Page{After: c.Query("late_after")})
	if err != nil && !invalid(err) {
		return err
	}
	for _, e := range late {
		p.Late = append(p.Late, historyLine(e))
	}
	p.LateNext = nextHref(c, "/admin/expirations", "late_after", next)
	return a.render(c, status, views.ExpirationsList(p))
}
