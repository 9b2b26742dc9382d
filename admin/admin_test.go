package admin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/crypto/bcrypt"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

const password = "correct horse battery"

// browser is an HTTP client with cookies that does not follow redirects, so that tests see
// them.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newBrowser(t *testing.T, e *apptest.Env) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: e.URL, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status int
	header http.Header
	doc    *goquery.Document
	body   string
}

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	doc, _ := goquery.NewDocumentFromReader(strings.NewReader(string(raw)))
	return page{status: resp.StatusCode, header: resp.Header, doc: doc, body: string(raw)}
}

// login signs in through the form, as a person would.
func (b *browser) login(email, pw string) page {
	b.t.Helper()
	p := b.do("GET", "/admin/login", nil)
	csrf, _ := p.doc.Find(`form[action="/admin/login"] input[name=csrf]`).Attr("value")
	return b.do("POST", "/admin/login", url.Values{"csrf": {csrf}, "email": {email}, "password": {pw}, "next": {"/admin"}})
}

func newOperator(t *testing.T, e *apptest.Env, email, role string) {
	t.Helper()
	if err := admin.SetOperator(context.Background(), e.DB, email, password, role, bcrypt.MinCost); err != nil {
		t.Fatal(err)
	}
}

func TestSignInAndOut(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleViewer)
	b := newBrowser(t, e)

	// Signed out, every console page sends to the sign-in page.
	for _, path := range []string{"/admin", "/admin/"} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/admin/login?next=") {
			t.Fatalf("GET %s signed out: %d %s", path, p.status, p.header.Get("Location"))
		}
	}
	login := b.do("GET", "/admin/login", nil)
	if login.status != 200 || login.doc.Find(`input[name=password][type=password]`).Length() != 1 {
		t.Fatalf("login page: %d", login.status)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options"} {
		if login.header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	if csp := login.header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}

	if p := b.login("ops@example.com", "wrong password!"); p.status != http.StatusUnauthorized || p.doc.Find(".error").Length() != 1 {
		t.Fatalf("wrong password: %d", p.status)
	}
	p := b.login("OPS@example.com", password)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/admin" {
		t.Fatalf("sign in: %d %s", p.status, p.header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "tekrar_session=") {
			cookie, _ = http.ParseSetCookie(c)
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", cookie)
	}
	var stored int
	if err := e.DB.Get(&stored, `SELECT count(*) FROM operator_sessions WHERE position($1::bytea in token_hash) > 0`, []byte(cookie.Value)); err != nil || stored != 0 {
		t.Fatal("the session token is stored in plain text")
	}
	home := b.do("GET", "/admin", nil)
	if home.status != 200 || !strings.Contains(home.doc.Find("header .who").Text(), "ops@example.com") {
		t.Fatalf("overview: %d %s", home.status, home.body)
	}

	// Signing out needs the session's CSRF token; without it nothing happens.
	if p := b.do("POST", "/admin/logout", url.Values{}); p.status != http.StatusForbidden {
		t.Fatalf("logout without CSRF: %d", p.status)
	}
	if p := b.do("POST", "/admin/logout", url.Values{"csrf": {"forged"}}); p.status != http.StatusForbidden {
		t.Fatalf("logout with a wrong CSRF token: %d", p.status)
	}
	csrf, _ := home.doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
	if p := b.do("POST", "/admin/logout", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", p.status)
	}
	if p := b.do("GET", "/admin", nil); p.status != http.StatusSeeOther {
		t.Fatalf("after logout: %d", p.status)
	}
	// The old cookie no longer works even if replayed.
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(e.URL + "/admin")
	jar.SetCookies(u, []*http.Cookie{{Name: "tekrar_session", Value: cookie.Value, Path: "/admin"}})
	replayer := &browser{t: t, base: e.URL, hc: &http.Client{Jar: jar, CheckRedirect: b.hc.CheckRedirect}}
	if p := replayer.do("GET", "/admin", nil); p.status != http.StatusSeeOther {
		t.Fatalf("a signed-out session still works: %d", p.status)
	}
}

func TestLoginFormNeedsItsCSRFToken(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	b := newBrowser(t, e)
	b.do("GET", "/admin/login", nil)
	p := b.do("POST", "/admin/login", url.Values{"csrf": {"guessed"}, "email": {"ops@example.com"}, "password": {password}})
	if p.status != http.StatusForbidden {
		t.Fatalf("forged login form: %d", p.status)
	}
}

func TestLoginThrottling(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	b := newBrowser(t, e)
	for i := 0; i < 5; i++ {
		if p := b.login("ops@example.com", "not the password"); p.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, p.status)
		}
	}
	if p := b.login("ops@example.com", password); p.status != http.StatusTooManyRequests {
		t.Fatalf("right password after 5 failures: %d, want 429", p.status)
	}
	// Another operator is not locked out, and unknown emails fail like wrong passwords.
	newOperator(t, e, "other@example.com", admin.RoleViewer)
	if p := b.login("other@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("other operator: %d", p.status)
	}
	if p := newBrowser(t, e).login("nobody@example.com", password); p.status != http.StatusUnauthorized {
		t.Fatalf("unknown email: %d", p.status)
	}
}

// What a user typed comes back escaped, never as markup.
func TestLoginEscapesInput(t *testing.T) {
	e := apptest.New(t)
	b := newBrowser(t, e)
	p := b.login(`"><script>alert(1)</script>@x.io`, "whatever it is")
	if strings.Contains(p.body, "<script>alert(1)</script>") {
		t.Fatal("the email was rendered as markup")
	}
	if v, _ := p.doc.Find("#email").Attr("value"); v != `"><script>alert(1)</script>@x.io` {
		t.Fatalf("email field value %q", v)
	}
}

func TestNextIsKeptInsideTheConsole(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	for next, want := range map[string]string{
		"/admin/keys?state=in_progress": "/admin/keys?state=in_progress",
		"https://evil.example/":         "/admin",
		"//evil.example/admin":          "/admin",
		"/v1/orders":                    "/admin",
		// Cleaned, a path must stay under /admin/.
		"/admin/../../x":              "/admin",
		"/admin/%2e%2e/%2E%2E/x":      "/admin",
		"/admin/..%2f..%2fx":          "/admin",
		"/admin/keys/../orders?q=1":   "/admin/orders?q=1",
		"/admin/./keys/":              "/admin/keys/",
		"/adminx":                     "/admin",
		"/admin/":                     "/admin/",
		"/admin/keys/1/a%2Fb":         "/admin/keys/1/a%2Fb",
		"/admin//evil.example":        "/admin",
		"/\\evil.example/admin":       "/admin",
		"/admin\\..\\..\\x":           "/admin",
		"/admin/%5C%5Cevil":           "/admin",
		"/admin/%0d%0aSet-Cookie:x=1": "/admin",
		"http:/admin":                 "/admin",
		"javascript:alert(1)//admin":  "/admin",
		"admin/keys":                  "/admin",
	} {
		b := newBrowser(t, e)
		page := b.do("GET", "/admin/login?next="+url.QueryEscape(next), nil)
		csrf, _ := page.doc.Find(`input[name=csrf]`).Attr("value")
		kept, _ := page.doc.Find(`input[name=next]`).Attr("value")
		p := b.do("POST", "/admin/login", url.Values{"csrf": {csrf}, "email": {"ops@example.com"}, "password": {password}, "next": {kept}})
		if p.header.Get("Location") != want {
			t.Errorf("next=%q redirected to %q, want %q", next, p.header.Get("Location"), want)
		}
	}
}
