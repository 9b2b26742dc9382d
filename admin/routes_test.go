package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// TestEveryConsoleRouteNeedsASession walks the routes the app registers, not a list kept by
// hand, so that a page or action added later cannot be left open: signed out, every console
// route but the sign-in page sends to it and changes nothing; signed in as a viewer, every
// form but signing out is refused.
func TestEveryConsoleRouteNeedsASession(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	order := pay(t, e, payment{key: "route-walk", item: "Latte", amount: 4500})
	b := newBrowser(t, e)
	var n int
	for _, r := range e.App.Routes() {
		if !strings.HasPrefix(r.Path, "/admin") || r.Path == "/admin/login" {
			continue
		}
		n++
		path := walkPath(r.Path, order)
		var form url.Values
		if r.Method == http.MethodPost {
			form = url.Values{"amount": {"45.00"}, "nonce": {"n-1"}, "reason": {"walk"}}
		}
		p := b.do(r.Method, path, form)
		loc := p.header.Get("Location")
		if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/admin/login?next=") {
			t.Errorf("%s %s signed out: %d %q, want 303 to the sign-in page", r.Method, path, p.status, loc)
		}
	}
	if n < 15 {
		t.Fatalf("only %d console routes registered: the walk is not seeing the console", n)
	}
	assertNoEffects(t, e, "signed-out requests")

	// Signed in as a viewer, with the session's own CSRF token, every form but signing out
	// is refused: acting is an admin's.
	newOperator(t, e, "viewer@example.com", admin.RoleViewer)
	if p := b.login("viewer@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("viewer sign-in: %d", p.status)
	}
	home := b.do("GET", "/admin", nil)
	csrf, _ := home.doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
	for _, r := range e.App.Routes() {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.Path, "/admin") || r.Path == "/admin/login" || r.Path == "/admin/logout" {
			continue
		}
		path := walkPath(r.Path, order)
		p := b.do(r.Method, path, url.Values{"csrf": {csrf}, "amount": {"45.00"}, "nonce": {"n-2"}, "reason": {"walk"}})
		if p.status != http.StatusForbidden {
			t.Errorf("viewer %s %s: %d, want 403", r.Method, path, p.status)
		}
	}
	assertNoEffects(t, e, "a viewer's requests")
}

// walkPath fills a route's parameters with the walk's order and key.
func walkPath(route, order string) string {
	return strings.NewReplacer(":client", "1", ":key", "route-walk", ":id", order, "*filepath", "x").Replace(route)
}

func assertNoEffects(t *testing.T, e *apptest.Env, who string) {
	t.Helper()
	var effects int
	if err := e.DB.Get(&effects, `SELECT (SELECT count(*) FROM refunds) + (SELECT count(*) FROM audit_log)`); err != nil || effects != 0 {
		t.Fatalf("%s left %d refunds or audit entries (%v)", who, effects, err)
	}
}
