package admin

// The console's pages of key events: replays, conflicts (and in-flight rejections), and
// expirations (keys expiring soon, the sweeper's passes, late retries). They answer "why
// did my app get a 409/422" and "was this repeat answered from storage".

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// conflictKinds are the event kinds behind each choice of the conflicts page's kind filter
// (views.ConflictKinds), and what its empty list says.
var conflictKinds = map[string]struct {
	kinds []string
	empty string
}{
	"conflicts": {[]string{checkout.EventReusedConflict}, "No conflicts match."},
	"in-flight": {[]string{checkout.EventInUseRejected}, "No in-flight rejections match."},
	"both":      {[]string{checkout.EventReusedConflict, checkout.EventInUseRejected}, "No conflicts or in-flight rejections match."},
}

// recentSweeps is how many sweeper passes the expirations page shows.
const recentSweeps = 20

func (a *console) replays(c *gin.Context) error {
	return a.eventList(c, views.EventsPage{Nav: nav(c, "Replays"), Title: "Replays", Path: "/admin/replays",
		Intro: "Repeats of a finished request, answered with its stored response: nothing ran twice.",
		Empty: "No replays match."}, []string{checkout.EventReplayed})
}

func (a *console) conflicts(c *gin.Context) error {
	p := views.EventsPage{Nav: nav(c, "Conflicts"), Title: "Conflicts", Path: "/admin/conflicts",
		Intro: "Keys sent again with another request (refused), and repeats that came while the key was still being worked on (told to retry).",
		Kind:  c.Query("kind")}
	if p.Kind == "" {
		p.Kind = views.ConflictKinds[0]
	}
	k, ok := conflictKinds[p.Kind]
	if !ok {
		p.Kind, p.Filter = views.ConflictKinds[0], eventFilterForm(c)
		p.Error = "kind must be conflicts, in-flight or both"
		return a.render(c, http.StatusBadRequest, views.EventsList(p))
	}
	p.Empty = k.empty
	return a.eventList(c, p, k.kinds)
}

// eventList renders a page of the events of kinds that match the request's filter form.
func (a *console) eventList(c *gin.Context, p views.EventsPage, kinds []string) error {
	p.Filter = eventFilterForm(c)
	kf, err := a.keyFilter(c.Request.Context(), p.Filter, views.ZoneOf(c.Request.Context()))
	if err != nil {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.EventsList(p))
	}
	f := report.EventFilter{Kinds: kinds, ClientID: kf.ClientID, Key: kf.Key, CustomerID: kf.CustomerID,
		OrderID: kf.OrderID, From: kf.From, To: kf.To}
	rows, next, err := report.ListEvents(c.Request.Context(), a.DB, f, report.Page{After: c.Query("after")})
	if errors.Is(err, report.ErrInvalidQuery) {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.EventsList(p))
	}
	if err != nil {
		return err
	}
	for _, e := range rows {
		p.Rows = append(p.Rows, eventLine(e))
	}
	p.Next = nextHref(c, p.Path, "after", next)
	return a.render(c, http.StatusOK, views.EventsList(p))
}

// eventFilterForm is the filter form of an event list: the key list's, without a state
// (an event list filters by kind instead).
func eventFilterForm(c *gin.Context) views.KeyFilter {
	f := queryFilter(c)
	f.State = ""
	return f
}

// eventDetail is what the events this console shows carry in their detail (see
// checkout.Service.execute): a conflict's method and path, the state that turned a repeat
// away, what a late retry was.
type eventDetail struct {
	Method      string   `json:"method"`
	Path        string   `json:"path"`
	Differs     []string `json:"differs"`
	State       string   `json:"state"`
	Swept       bool     `json:"swept"`
	SameRequest *bool    `json:"same_request"`
}

func eventLine(e report.EventRow) views.EventLine {
	l := views.EventLine{At: e.At, Kind: e.Kind, Client: fmt.Sprintf("%s (%d)", e.ClientName, e.ClientID),
		Key: e.Key, KeyHref: keyHref(e.ClientID, e.Key), Request: e.RequestID, Address: e.RemoteAddr,
		Device: e.UserAgent}
	if e.Status != nil {
		l.Status = strconv.Itoa(*e.Status)
	}
	if e.OrderPublicID != nil {
		l.Order, l.OrderHref = "order "+*e.OrderPublicID, orderHref(*e.OrderPublicID)
	}
	var d eventDetail
	if len(e.Detail) > 0 {
		// The detail only adds to the line: one that does not decode leaves it out.
		_ = json.Unmarshal(e.Detail, &d)
	}
	switch e.Kind {
	case checkout.EventReusedConflict:
		l.StoredFP, l.SentFP, l.Differs = e.KeyFingerprint, e.Fingerprint, d.Differs
		stored, sent := e.KeyMethod+" "+e.KeyPath, d.Method+" "+d.Path
		if e.KeyMethod != "" && d.Method != "" && stored != sent {
			l.StoredLine, l.SentLine = stored, sent
		}
	case checkout.EventInUseRejected:
		l.Note = "the first request was still running"
		if d.State == checkout.StateNeedsAttention {
			l.Note = "the key needs an operator's attention"
		}
	case checkout.EventLateRetry:
		l.Note = "a request"
		if d.SameRequest != nil && *d.SameRequest {
			l.Note = "the same request"
		} else if d.SameRequest != nil {
			l.Note = "another request"
		}
		if d.Swept {
			l.Note += ", after the key was swept"
		} else {
			l.Note += ", after the key expired"
		}
	}
	return l
}

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
	keys, next, err := report.ExpiringKeys(ctx, a.DB, now, now.Add(time.Hour), report.Page{After: c.Query("expiring_after")})
	if err != nil && !invalid(err) {
		return err
	}
	for _, r := range keys {
		p.Expiring = append(p.Expiring, keyLine(r))
	}
	p.ExpiringNext = nextHref(c, "/admin/expirations", "expiring_after", next)

	sweeps, err := report.RecentSweeps(ctx, a.DB, recentSweeps)
	if err != nil {
		return err
	}
	for _, s := range sweeps {
		p.Sweeps = append(p.Sweeps, views.SweepLine{At: s.StartedAt, Node: s.Node, Tombstoned: s.KeysTombstoned,
			Deleted: s.KeysDeleted, Forgotten: s.TombstonesForgotten, Gone: s.EventsDeleted,
			Took: s.FinishedAt.Sub(s.StartedAt).Round(time.Millisecond).String(), Error: s.Error})
	}

	late, next, err := report.ListEvents(ctx, a.DB, report.EventFilter{Kinds: []string{checkout.EventLateRetry}},
		report.Page{After: c.Query("late_after")})
	if err != nil && !invalid(err) {
		return err
	}
	for _, e := range late {
		p.Late = append(p.Late, eventLine(e))
	}
	p.LateNext = nextHref(c, "/admin/expirations", "late_after", next)
	return a.render(c, status, views.ExpirationsList(p))
}

// nextHref is the URL of a list's next page: the request's own query (its filters, and
// the cursors of the page's other lists) with param set to next's cursor; "" on the last
// page.
func nextHref(c *gin.Context, path, param string, next report.Page) string {
	if next.After == "" {
		return ""
	}
	q := c.Request.URL.Query()
	q.Set(param, next.After)
	return path + "?" + q.Encode()
}
