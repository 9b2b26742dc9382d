package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// TestConsoleRefusesTextItCannotStore sends every page, search field and form a NUL
// character or bytes that are not UTF-8, which Postgres refuses even as a search term: the
// console answers 400 before any query, never a 500.
func TestConsoleRefusesTextItCannotStore(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	b := newBrowser(t, e)
	if p := b.login("ops@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", p.status)
	}
	refused := func(what string, p page) {
		t.Helper()
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, `"code":"malformed_request"`) {
			t.Errorf("%s: %d %.200s", what, p.status, p.body)
		}
	}
	fields := []string{"key", "customer", "email", "target", "client", "amount", "currency", "last4", "from", "to",
		"window", "kind", "after", "order", "day", "expiring_after", "late_after", "first", "second"}
	for _, bad := range []string{"a\x00b", "a\xffb"} {
		for _, path := range []string{"/admin", "/admin/keys", "/admin/replays", "/admin/conflicts", "/admin/expirations",
			"/admin/orders", "/admin/orders/pair", "/admin/audit"} {
			for _, f := range fields {
				q := url.Values{f: {bad}}.Encode()
				refused("GET "+path+"?"+q, b.do("GET", path+"?"+q, nil))
			}
		}
		for _, path := range []string{"/admin/keys/1/" + url.PathEscape(bad), "/admin/keys/1/" + url.PathEscape(bad) + "/release"} {
			refused("GET "+path, b.do("GET", path, nil))
		}
		refused("sign-in", newBrowser(t, e).login("ops@example.com", "pass"+bad))
		refused("refund form", b.do("POST", "/admin/orders/1/refund", url.Values{"amount": {"1"}, "reason": {bad}}))
	}
	// The console still works.
	if p := b.do("GET", "/admin/keys?key=abc", nil); p.status != http.StatusOK {
		t.Fatalf("a plain search: %d", p.status)
	}
}
