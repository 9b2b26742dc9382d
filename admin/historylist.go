package admin

// A history list shows key history entries one way wherever they appear: the replays and
// conflicts pages, and the late retries of the expirations page. They answer "why did my
// app get a 409/422" and "was this repeat answered from storage".

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// historyList renders a page of the key history entries of kinds that match the request's filter form.
func (a *console) historyList(c *gin.Context, p views.HistoryPage, kinds []string) error {
	p.Filter, p.Export = historyFilterForm(c), exportHref(c, p.Path+".csv")
	kf, err := a.keyFilter(c.Request.Context(), p.Filter, views.ZoneOf(c.Request.Context()))
	if err != nil {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.HistoryList(p))
	}
	f := report.HistoryFilter{Kinds: kinds, ClientID: kf.ClientID, Key: kf.Key, CustomerID: kf.CustomerID,
		OrderID: kf.OrderID, From: kf.From, To: kf.To}
	rows, next, err := report.ListHistory(c.Request.Context(), a.Read, f, report.Page{After: c.Query("after")})
	if errors.Is(err, report.ErrInvalidQuery) {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.HistoryList(p))
	}
	if err != nil {
		return err
	}
	for _, e := range rows {
		p.Rows = append(p.Rows, historyLine(e))
	}
	p.Next = nextHref(c, p.Path, "after", next)
	return a.render(c, http.StatusOK, views.HistoryList(p))
}

// historyDetail is what the history entries this console shows carry in their detail (see
// checkout.Service.execute): a conflict's method and path, the state that turned a repeat
// away, what a late retry was.
type historyDetail struct {
	Method      string   `json:"method"`
	Path        string   `json:"path"`
	Differs     []string `json:"differs"`
	State       string   `json:"state"`
	Swept       bool     `json:"swept"`
	SameRequest *bool    `json:"same_request"`
}

func historyLine(e report.HistoryRow) views.HistoryLine {
	l := views.HistoryLine{At: e.At, Kind: e.Kind, Client: fmt.Sprintf("%s (%d)", e.ClientName, e.ClientID),
		Key: e.Key, KeyHref: keyHref(e.ClientID, e.Key), Request: e.RequestID, Address: e.RemoteAddr,
		Device: e.UserAgent}
	if e.Status != nil {
		l.Status = strconv.Itoa(*e.Status)
	}
	if e.OrderPublicID != nil {
		l.Order, l.OrderHref = "order "+*e.OrderPublicID, orderHref(*e.OrderPublicID)
	}
	var d historyDetail
	if len(e.Detail) > 0 {
		// The detail only adds to the line: one that does not decode leaves it out.
		_ = json.Unmarshal(e.Detail, &d)
	}
	switch e.Kind {
	case checkout.KindReusedConflict:
		l.StoredFP, l.SentFP, l.Differs = e.KeyFingerprint, e.Fingerprint, d.Differs
		stored, sent := e.KeyMethod+" "+e.KeyPath, d.Method+" "+d.Path
		if e.KeyMethod != "" && d.Method != "" && stored != sent {
			l.StoredLine, l.SentLine = stored, sent
		}
	case checkout.KindInUseRejected:
		l.Note = "the first request was still running"
		if d.State == checkout.StateNeedsAttention {
			l.Note = "the key needs an operator's attention"
		}
	case checkout.KindLateRetry:
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
