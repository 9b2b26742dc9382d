package admin

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"net/http"
	"runtime/debug"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/views"
)

// The console answers every error one way: a handler returns it, and handle turns it into
// the console's error page (the layout, the status in words, what to do, the request id).
// No handler writes an error page, or plain text, itself: one place decides what an
// operator sees of an error and what the log keeps of it. TestOnlyTheWrapperWritesErrors
// holds the handlers to that.

// pageError is an error whose status and message are the operator's to read: a page or a
// thing that does not exist, input that cannot be a value, an action the operator may not
// take.
type pageError struct {
	status int
	msg    string
}

func (e *pageError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.msg) }

func notFound(msg string) error   { return &pageError{http.StatusNotFound, msg} }
func badRequest(msg string) error { return &pageError{http.StatusBadRequest, msg} }
func forbidden(msg string) error  { return &pageError{http.StatusForbidden, msg} }

// What the error page says of the things a handler may find missing.
const (
	noSuchOrder    = "There is no such order."
	noSuchKey      = "There is no such key: it may have been forgotten after its grace period."
	noSuchOperator = "There is no such operator."
	noSuchPage     = "There is no such page in the console."
	serverError    = "The page could not be shown. Nothing was changed by showing it; try again, and if it keeps failing, report the request id below."
	storeDown      = "The console cannot reach its database right now. Nothing was changed. Reload this page in a moment; if it persists, check the database."
)

// missing maps the domain's "no such thing" errors to what the error page says of them, so
// that a handler can return them as they come.
var missing = []struct {
	err error
	msg string
}{
	{checkout.ErrOrderNotFound, noSuchOrder},
	{checkout.ErrKeyNotFound, noSuchKey},
	{ErrNoOperator, noSuchOperator},
	{deliveries.ErrEndpointNotFound, "There is no such webhook endpoint."},
	{report.ErrEndpointNotFound, "There is no such webhook endpoint."},
	{deliveries.ErrDeliveryNotFound, "There is no such webhook delivery."},
	{inbox.ErrDeadLetterNotFound, "There is no such dead letter."},
}

// handle is the one way a console handler (or middleware) is mounted: what h returns is
// answered with the console's error page, and the request goes no further. A panic, a bug
// and never a way to answer, is the 500 page too, its stack in the log.
func (a *console) handle(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == http.ErrAbortHandler {
				panic(r)
			}
			a.Logger.Error("console: panic", "panic", fmt.Sprint(r), "request_id", server.RequestID(c),
				"stack", string(debug.Stack()))
			if c.Writer.Written() {
				c.Abort()
				return
			}
			a.errorPage(c, &pageError{http.StatusInternalServerError, serverError})
		}()
		if err := h(c); err != nil {
			a.errorPage(c, err)
		}
	}
}

// errorTitles are the titles of the console's error pages by status.
var errorTitles = map[int]string{
	http.StatusBadRequest:          "Bad request",
	http.StatusForbidden:           "Not allowed",
	http.StatusNotFound:            "Not found",
	http.StatusInternalServerError: "Something went wrong",
	http.StatusServiceUnavailable:  "Database unavailable",
}

// errorPage answers err with an error page inside the console's layout (with the
// navigation when signed in): a pageError's status and message, a missing thing's 404, the
// store-down 503 (the API's store_unavailable), or a 500 whose details go to the log under
// the request id, never to the page.
func (a *console) errorPage(c *gin.Context, err error) {
	c.Abort()
	rid := server.RequestID(c)
	v := views.ErrorView{Status: http.StatusInternalServerError, Message: serverError, RequestID: rid}
	var pe *pageError
	switch {
	case errors.As(err, &pe):
		v.Status, v.Message = pe.status, pe.msg
	case db.IsUnavailable(err):
		a.Logger.Warn("console: store unavailable", "err", err, "request_id", rid)
		c.Header("Retry-After", "2")
		v.Status, v.Message = http.StatusServiceUnavailable, storeDown
	default:
		v.Status = 0
		for _, m := range missing {
			if errors.Is(err, m.err) {
				v.Status, v.Message = http.StatusNotFound, m.msg
				break
			}
		}
		if v.Status == 0 {
			a.Logger.Error("console", "err", err, "request_id", rid)
			v.Status = http.StatusInternalServerError
		}
	}
	v.Title = errorTitles[v.Status]
	if v.Title == "" {
		v.Title = http.StatusText(v.Status)
	}
	if _, ok := c.Get(sessionKey); ok {
		v.Nav = nav(c, "")
	}
	var buf bytes.Buffer
	if err := views.ErrorPage(v).Render(c.Request.Context(), &buf); err != nil {
		// The error page itself failed: still a page, and still the request id.
		a.Logger.Error("render console error page", "err", err, "request_id", rid)
		buf.Reset()
		fmt.Fprintf(&buf, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s · tekrar</title><link rel=\"stylesheet\" href=\"/static/css/tekrar.css\"></head><body><header class=\"top\"><a class=\"brand\" href=\"/admin\">tekrar</a></header><main id=\"main\"><section class=\"error-page\"><h1>%[1]s</h1><p class=\"hint\">Request id <code class=\"request-id\">%s</code></p></section></main></body></html>\n",
			html.EscapeString(v.Title), html.EscapeString(rid))
	}
	c.Data(v.Status, "text/html; charset=utf-8", buf.Bytes())
}
