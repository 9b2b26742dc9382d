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
	// A form is read up to 64 KiB: the sign-in form is open to anyone.
	big := url.Values{"email": {"ops@example.com"}, "password": {strings.Repeat("p", 100<<10)}}
	if p := newBrowser(t, e).do("POST", "/admin/login", big); p.status != http.StatusRequestEntityTooLarge ||
		!strings.Contains(p.body, `"code":"body_too_large"`) {
		t.Errorf("a 100 KiB sign-in form: %d %.200s", p.status, p.body)
	}
	// The console still works.
	if p := b.do("GET", "/admin/keys?key=abc", nil); p.status != http.StatusOK {
		t.Fatalf("a plain search: %d", p.status)
	}
}

// TestSignInWhateverTheBrowserSends: HTTP allows a User-Agent that is not UTF-8, which
// Postgres text refuses, and the failed-sign-in record cuts a long email at 254 bytes,
// possibly inside a character. Neither may stop an operator from signing in (it was a 503)
// or a failed attempt from being counted.
func TestSignInWhateverTheBrowserSends(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	signIn := func(email, pw, ua string) int {
		t.Helper()
		b := newBrowser(t, e)
		csrf, _ := b.do("GET", "/admin/login", nil).doc.Find(`form[action="/admin/login"] input[name=csrf]`).Attr("value")
		req, _ := http.NewRequest("POST", e.URL+"/admin/login",
			strings.NewReader(url.Values{"csrf": {csrf}, "email": {email}, "password": {pw}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("User-Agent", ua)
		resp, err := b.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, ua := range []string{"caf\xe9-browser", strings.Repeat("é", 400)} {
		if s := signIn("ops@example.com", password, ua); s != http.StatusSeeOther {
			t.Errorf("sign-in with User-Agent %.12q: %d", ua, s)
		}
	}
	long := strings.Repeat("a", 253) + "é@example.com"
	if s := signIn(long, "wrong password", "caf\xe9"); s != http.StatusUnauthorized {
		t.Errorf("failed sign-in with a long email: %d", s)
	}
	var n int
	if err := e.DB.Get(&n, `SELECT count(*) FROM login_failures`); err != nil || n != 1 {
		t.Errorf("%d failed sign-ins recorded (%v), want 1", n, err)
	}
}
