package admin

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/views"
)

// keys is the key list: every idempotency key, newest first, narrowed by the filter form.
func (a *console) keys(c *gin.Context) error {
	f := queryFilter(c)
	p := views.KeysPage{Nav: nav(c, "Keys"), Filter: f, Export: exportHref(c, "/admin/keys.csv")}
	kf, err := a.keyFilter(c.Request.Context(), f, views.ZoneOf(c.Request.Context()))
	if err != nil {
		p.Error = err.Error()
		return a.render(c, http.StatusBadRequest, views.KeysList(p))
	}
	rows, next, err := report.ListKeys(c.Request.Context(), a.Read, kf, report.Page{After: c.Query("after")})
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
