package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// A console page that cannot be shown is a console page: the layout (style sheet and
// navigation), the status in words, and the request id the log has the details under.
// Before, these were unstyled plain text.
func TestErrorPagesAreConsolePages(t *testing.T) {
	e := apptest.New(t)
	viewer := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	adm := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	first := actOrder(t, e, "k-errors", 4500)
	tests := []struct {
		name   string
		b      *browser
		method string
		path   string
		form   url.Values
		status int
		says   string
	}{
		{"an order that does not exist", viewer, "GET", "/admin/orders/ord_00000000000000000000000000000000", nil, http.StatusNotFound, "no such order"},
		{"an order id that is not one", viewer, "GET", "/admin/orders/abc", nil, http.StatusNotFound, "no such order"},
		{"a pair without ids", viewer, "GET", "/admin/orders/pair?first=" + first, nil, http.StatusBadRequest, "second must be an order id"},
		{"a pair with a missing order", viewer, "GET", "/admin/orders/pair?first=" + first + "&second=ord_00000000000000000000000000000000", nil, http.StatusNotFound, "no order ord_00000000000000000000000000000000"},
		{"a key that does not exist", viewer, "GET", keyPath(e, "no-such-key"), nil, http.StatusNotFound, "no such key"},
		{"an action as a viewer", viewer, "GET", "/admin/orders/" + first + "/refund", nil, http.StatusForbidden, "ask an admin"},
		{"a refund of no order", adm, "GET", "/admin/orders/ord_00000000000000000000000000000000/refund", nil, http.StatusNotFound, "no such order"},
		{"a release of no key", adm, "GET", keyPath(e, "no-such-key") + "/release", nil, http.StatusNotFound, "no such key"},
		{"a form without its CSRF token", adm, "POST", "/admin/orders/" + first + "/refund", url.Values{"amount": {"1.00"}}, http.StatusForbidden, "nothing was done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.b.do(tt.method, tt.path, tt.form)
			if p.status != tt.status {
				t.Fatalf("status %d, want %d: %s", p.status, tt.status, p.body)
			}
			if ct := p.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Fatalf("Content-Type %q: not a page", ct)
			}
			if p.doc.Find(`link[rel=stylesheet][href="/static/css/tekrar.css"]`).Length() != 1 || p.doc.Find("header nav").Length() != 1 {
				t.Error("not in the console's layout (style sheet and navigation)")
			}
			if msg := p.doc.Find(".error-page").Text(); !strings.Contains(strings.ToLower(msg), tt.says) {
				t.Errorf("the page says %q, want %q", msg, tt.says)
			}
			rid := p.header.Get("X-Request-Id")
			if got := p.doc.Find(".error-page code.request-id").Text(); rid == "" || got != rid {
				t.Errorf("request id on the page %q, in the header %q", got, rid)
			}
		})
	}
}
