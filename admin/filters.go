package admin

// The search forms and paging that the console's lists share: the key list's filter
// form (also the replays' and conflicts', without a state), its times read in the
// operator's zone, and the link to a list's next page.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// queryFilter reads the filter form of the key, replay and conflict lists.
func queryFilter(c *gin.Context) views.KeyFilter {
	return views.KeyFilter{Key: c.Query("key"), Client: c.Query("client"), Customer: c.Query("customer"),
		Order: c.Query("order"), State: c.Query("state"), From: c.Query("from"), To: c.Query("to")}
}

// historyFilterForm is the filter form of a history list: the key list's, without a state
// (a history list filters by kind instead).
func historyFilterForm(c *gin.Context) views.KeyFilter {
	f := queryFilter(c)
	f.State = ""
	return f
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
		kf.OrderID, err = report.OrderIDOf(ctx, a.Read, f.Order)
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

// exportHref is the URL of a list's CSV export: the request's own query (the page's
// filters) without the page cursors, so that the file holds every row the filters select,
// not the page on screen.
func exportHref(c *gin.Context, path string) string {
	q := c.Request.URL.Query()
	for _, cursor := range []string{"after", "expiring_after", "late_after"} {
		q.Del(cursor)
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// caseFilterForm reads the filter form of the disputes and compensations lists; param names
// the list's status parameter (status, state), def its value when absent.
func caseFilterForm(c *gin.Context, param, def string) views.CaseFilter {
	return views.CaseFilter{Status: c.DefaultQuery(param, def), Client: strings.TrimSpace(c.Query("client")),
		Order: strings.TrimSpace(c.Query("order"))}
}

// caseNarrowing reads the client and the order (by its public id, looked up) a case list is
// narrowed to; 0 for none.
func (a *console) caseNarrowing(ctx context.Context, f views.CaseFilter) (client, order int64, err error) {
	if f.Client != "" {
		if client, err = strconv.ParseInt(f.Client, 10, 64); err != nil || client <= 0 {
			return 0, 0, filterError("client id must be a number")
		}
	}
	if f.Order != "" {
		order, err = report.OrderIDOf(ctx, a.Read, f.Order)
		if errors.Is(err, checkout.ErrOrderNotFound) {
			return 0, 0, filterError("order must be the id of an order, like ord_ and 32 hex digits")
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return client, order, nil
}

// filterError is a case list's filter that cannot be a value.
type filterError string

func (e filterError) Error() string { return string(e) }

// shownBesideForm says whether a list's error is its input's, to show beside its form with a
// 400, rather than the error page's.
func shownBesideForm(err error) bool {
	var fe filterError
	return errors.Is(err, report.ErrInvalidQuery) || errors.As(err, &fe)
}
