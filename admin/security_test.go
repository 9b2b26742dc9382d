package admin_test

import (
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// The console's security review (docs/console.md, "Security"): each test here reproduces a
// finding against a whole tekrar.

// behindProxy starts tekrar trusting the loopback proxy's X-Forwarded-For, so that a test
// can sign in from several client addresses.
func behindProxy(t *testing.T) *apptest.Env {
	t.Helper()
	return apptest.New(t, func(c *config.Server) { c.TrustedProxies = []string{"127.0.0.1/32", "::1/128"} })
}

var loginCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn posts the sign-in form from addr (as the proxy's X-Forwarded-For; "" for the
// loopback address) and returns the status. It is safe in a goroutine: it reports errors
// instead of failing the test.
func signIn(e *apptest.Env, addr, email, pw string) (int, error) {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, body string) (int, string, error) {
		req, err := http.NewRequest(method, e.URL+"/admin/login", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		if addr != "" {
			req.Header.Set("X-Forwarded-For", addr)
		}
		if method == "POST" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	_, form, err := send("GET", "")
	if err != nil {
		return 0, err
	}
	m := loginCSRF.FindStringSubmatch(form)
	if m == nil {
		return 0, fmt.Errorf("no CSRF token on the sign-in page")
	}
	status, _, err := send("POST", url.Values{"csrf": {m[1]}, "email": {email}, "password": {pw}}.Encode())
	return status, err
}

func mustSignIn(t *testing.T, e *apptest.Env, addr, email, pw string, want int) {
	t.Helper()
	got, err := signIn(e, addr, email, pw)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("sign-in as %s from %q: %d, want %d", email, addr, got, want)
	}
}

func countRows(t *testing.T, e *apptest.Env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.DB.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConcurrentWrongPasswordsAreCountedFirst: 20 wrong passwords sent at once were all
// checked, because each read the failure count before any failure was recorded. Each
// attempt now takes its slot atomically before its password is checked: 5 are checked,
// 15 refused unchecked, and then the right password from that address is refused too.
func TestConcurrentWrongPasswordsAreCountedFirst(t *testing.T) {
	e := behindProxy(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	const burst = 20
	before := admin.CheckedPasswords()
	statuses := make([]int, burst)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range burst {
		wg.Go(func() {
			<-start
			statuses[i], errs[i] = signIn(e, "198.51.100.1", "ops@example.com", "not the password")
		})
	}
	close(start)
	wg.Wait()
	byStatus := map[int]int{}
	for i := range burst {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		byStatus[statuses[i]]++
	}
	if byStatus[http.StatusUnauthorized] != 5 || byStatus[http.StatusTooManyRequests] != burst-5 {
		t.Errorf("answers %v, want 5×401 and %d×429", byStatus, burst-5)
	}
	if n := admin.CheckedPasswords() - before; n != 5 {
		t.Errorf("%d passwords checked, want 5", n)
	}
	if n := countRows(t, e, `SELECT count(*) FROM login_failures`); n != 5 {
		t.Errorf("%d failures recorded, want 5", n)
	}
	// The right password from that address is refused until the window has passed, without
	// being checked; from another address the operator signs in.
	before = admin.CheckedPasswords()
	mustSignIn(t, e, "198.51.100.1", "ops@example.com", password, http.StatusTooManyRequests)
	if n := admin.CheckedPasswords() - before; n != 0 {
		t.Errorf("a throttled sign-in checked %d passwords", n)
	}
	mustSignIn(t, e, "198.51.100.2", "ops@example.com", password, http.StatusSeeOther)
	e.Clock.Advance(16 * time.Minute)
	mustSignIn(t, e, "198.51.100.1", "ops@example.com", password, http.StatusSeeOther)
}

// TestThrottlePerAddressAndPerEmail: one password tried across many emails was never
// slowed, and anyone could lock any operator out. An address may fail 20 times whatever
// the emails; an email 50 times whatever the addresses, so that locking an operator out
// takes several addresses.
func TestThrottlePerAddressAndPerEmail(t *testing.T) {
	t.Run("one address, many emails", func(t *testing.T) {
		e := behindProxy(t)
		for i := range 21 {
			newOperator(t, e, fmt.Sprintf("ops%d@example.com", i), admin.RoleViewer)
		}
		for i := range 20 {
			mustSignIn(t, e, "198.51.100.1", fmt.Sprintf("ops%d@example.com", i), "sprayed password", http.StatusUnauthorized)
		}
		mustSignIn(t, e, "198.51.100.1", "ops20@example.com", "sprayed password", http.StatusTooManyRequests)
		mustSignIn(t, e, "198.51.100.1", "ops20@example.com", password, http.StatusTooManyRequests)
		mustSignIn(t, e, "198.51.100.2", "ops20@example.com", password, http.StatusSeeOther)
	})
	t.Run("one email, many addresses", func(t *testing.T) {
		e := behindProxy(t)
		newOperator(t, e, "ops@example.com", admin.RoleAdmin)
		for i := range 50 {
			addr := fmt.Sprintf("198.51.100.%d", 1+i/5)
			mustSignIn(t, e, addr, "ops@example.com", "guess", http.StatusUnauthorized)
		}
		mustSignIn(t, e, "203.0.113.9", "ops@example.com", password, http.StatusTooManyRequests)
	})
	t.Run("an IPv6 /64 is one address", func(t *testing.T) {
		e := behindProxy(t)
		newOperator(t, e, "ops@example.com", admin.RoleAdmin)
		for i := range 5 {
			mustSignIn(t, e, fmt.Sprintf("2001:db8:1:2::%x", i+1), "ops@example.com", "guess", http.StatusUnauthorized)
		}
		mustSignIn(t, e, "2001:db8:1:2:ffff::9", "ops@example.com", password, http.StatusTooManyRequests)
		mustSignIn(t, e, "2001:db8:1:3::1", "ops@example.com", password, http.StatusSeeOther)
	})
	t.Run("a sign-in gives its slots back", func(t *testing.T) {
		e := behindProxy(t)
		newOperator(t, e, "ops@example.com", admin.RoleAdmin)
		for range 30 {
			mustSignIn(t, e, "198.51.100.1", "ops@example.com", password, http.StatusSeeOther)
		}
		mustSignIn(t, e, "198.51.100.1", "ops@example.com", "typo", http.StatusUnauthorized)
		if n := countRows(t, e, `SELECT coalesce(sum(attempts), 0) FROM login_throttle`); n != 3 {
			t.Errorf("%d slots taken after 30 sign-ins and one typo, want 3 (one per counter)", n)
		}
	})
}

// TestUnknownEmailCostsAsMuch: an unknown email was checked against a cheap hash, so the
// time of a sign-in told which emails are operators'. It is checked at the cost of stored
// passwords, on the path of a wrong password.
func TestUnknownEmailCostsAsMuch(t *testing.T) {
	if got := admin.DummyHashCost(); got != admin.PasswordCost {
		t.Fatalf("unknown emails are checked against a hash of cost %d, stored passwords have %d", got, admin.PasswordCost)
	}
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	for _, email := range []string{"ops@example.com", "nobody@example.com"} {
		before := admin.CheckedPasswords()
		mustSignIn(t, e, "", email, "wrong password", http.StatusUnauthorized)
		if n := admin.CheckedPasswords() - before; n != 1 {
			t.Errorf("%s: %d password checks, want 1", email, n)
		}
		if n := countRows(t, e, `SELECT count(*) FROM login_failures WHERE email = $1`, email); n != 1 {
			t.Errorf("%s: %d failures recorded, want 1", email, n)
		}
	}
}

// TestPasswordChecksAreBounded: a sign-in that cannot get a password check slot in time is
// answered 503 with Retry-After, unchecked and not counted as a failure.
func TestPasswordChecksAreBounded(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	if n := admin.PasswordCheckSlots(); n < 1 {
		t.Fatalf("%d password check slots", n)
	}
	release := admin.HoldPasswordChecks(50 * time.Millisecond)
	before := admin.CheckedPasswords()
	mustSignIn(t, e, "", "ops@example.com", password, http.StatusServiceUnavailable)
	release()
	if n := admin.CheckedPasswords() - before; n != 0 {
		t.Errorf("%d passwords checked without a slot", n)
	}
	if n := countRows(t, e, `SELECT coalesce(sum(attempts), 0) FROM login_throttle`); n != 0 {
		t.Errorf("an unchecked sign-in kept %d slots", n)
	}
	mustSignIn(t, e, "", "ops@example.com", password, http.StatusSeeOther)
}

// send is browser.do with a raw body and headers (name, value pairs).
func (b *browser) send(method, path, contentType, body string, headers ...string) page {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

// loginForm is the sign-in form, filled in, with the CSRF token of a fresh sign-in page.
func (b *browser) loginForm(email, pw string) url.Values {
	b.t.Helper()
	csrf, _ := b.do("GET", "/admin/login", nil).doc.Find(`form[action="/admin/login"] input[name=csrf]`).Attr("value")
	return url.Values{"csrf": {csrf}, "email": {email}, "password": {pw}, "next": {"/admin"}}
}

func multipartBody(t *testing.T, form url.Values) (string, string) {
	t.Helper()
	var buf strings.Builder
	w := multipart.NewWriter(&buf)
	for k, vs := range form {
		for _, v := range vs {
			_ = w.WriteField(k, v)
		}
	}
	f, _ := w.CreateFormFile("upload", "big.bin")
	_, _ = f.Write([]byte(strings.Repeat("x", 1<<20)))
	_ = w.Close()
	return w.FormDataContentType(), buf.String()
}

// TestConsoleTakesOnlyURLEncodedForms: the sign-in form parsed multipart/form-data without
// a size limit, before authentication, and skipped the text checks. Every console form is
// URL-encoded; anything else is refused with 415 before it is read, and nothing is stored.
func TestConsoleTakesOnlyURLEncodedForms(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	b := newBrowser(t, e)
	form := b.loginForm("ops@example.com", password)
	ct, body := multipartBody(t, form)
	for _, tc := range []struct{ name, contentType, body string }{
		{"multipart", ct, body},
		{"multipart, bad text", ct, strings.Replace(body, password, "pass\x00word", 1)},
		{"JSON", "application/json", `{"email":"ops@example.com"}`},
		{"no type", "", form.Encode()},
		{"text", "text/plain", form.Encode()},
	} {
		p := b.send("POST", "/admin/login", tc.contentType, tc.body)
		if p.status != http.StatusUnsupportedMediaType || !strings.Contains(p.body, `"code":"unsupported_media_type"`) {
			t.Errorf("%s sign-in: %d %.200s", tc.name, p.status, p.body)
		}
	}
	for _, table := range []string{"operator_sessions", "login_failures", "login_throttle"} {
		if n := countRows(t, e, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d rows in %s after refused sign-ins", n, table)
		}
	}
	// Signed in, the console's own forms are refused the same way.
	if p := b.login("ops@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", p.status)
	}
	csrf, _ := b.do("GET", "/admin", nil).doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
	ct, body = multipartBody(t, url.Values{"csrf": {csrf}})
	if p := b.send("POST", "/admin/logout", ct, body); p.status != http.StatusUnsupportedMediaType {
		t.Errorf("multipart sign-out: %d", p.status)
	}
	if p := b.do("GET", "/admin", nil); p.status != http.StatusOK {
		t.Errorf("the multipart sign-out signed out: %d", p.status)
	}
}

// TestConsoleRefusesCrossOriginForms: the console checked only the CSRF token. A
// state-changing request that the browser says comes from another origin is refused with
// 403, even with a valid token.
func TestConsoleRefusesCrossOriginForms(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	const urlencoded = "application/x-www-form-urlencoded"
	tests := []struct {
		name    string
		headers []string
		want    int
	}{
		{"cross-origin Origin", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"same host, other port", []string{"Origin", strings.Replace(e.URL, "127.0.0.1:", "127.0.0.1:1", 1)}, http.StatusForbidden},
		{"opaque Origin", []string{"Origin", "null"}, http.StatusForbidden},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"no Origin, cross-origin Referer", []string{"Referer", "https://evil.example/page"}, http.StatusForbidden},
		{"no Origin, Referer not a page", []string{"Referer", "javascript:alert(1)"}, http.StatusForbidden},
		{"same Origin", []string{"Origin", e.URL}, http.StatusSeeOther},
		{"same-origin fetch", []string{"Sec-Fetch-Site", "same-origin", "Origin", e.URL}, http.StatusSeeOther},
		{"no Origin, same-origin Referer", []string{"Referer", e.URL + "/admin/login"}, http.StatusSeeOther},
		{"no Origin, no Referer", nil, http.StatusSeeOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Signing in, then signing out, each with these headers.
			b := newBrowser(t, e)
			p := b.send("POST", "/admin/login", urlencoded, b.loginForm("ops@example.com", password).Encode(), tt.headers...)
			if p.status != tt.want {
				t.Fatalf("sign-in: %d, want %d %.200s", p.status, tt.want, p.body)
			}
			if tt.want == http.StatusForbidden {
				if !strings.Contains(p.body, `"code":"cross_origin_request"`) {
					t.Errorf("refusal: %.200s", p.body)
				}
				if p := b.login("ops@example.com", password); p.status != http.StatusSeeOther {
					t.Fatalf("plain sign-in: %d", p.status)
				}
			}
			csrf, _ := b.do("GET", "/admin", nil).doc.Find(`form[action="/admin/logout"] input[name=csrf]`).Attr("value")
			p = b.send("POST", "/admin/logout", urlencoded, url.Values{"csrf": {csrf}}.Encode(), tt.headers...)
			if p.status != tt.want {
				t.Fatalf("sign-out: %d, want %d", p.status, tt.want)
			}
			signedIn := b.do("GET", "/admin", nil).status == http.StatusOK
			if signedIn != (tt.want == http.StatusForbidden) {
				t.Errorf("signed in after the sign-out: %v", signedIn)
			}
		})
	}
}

// TestStaticListsNoDirectories: /static/ listed its files. A directory is not found; the
// files are still served.
func TestStaticListsNoDirectories(t *testing.T) {
	e := apptest.New(t)
	for _, tt := range []struct {
		path string
		want int
	}{
		{"/static/", http.StatusNotFound},
		{"/static/css/", http.StatusNotFound},
		{"/static/js/", http.StatusNotFound},
		{"/static/css", http.StatusNotFound},
		{"/static/js", http.StatusNotFound},
		{"/static/.", http.StatusNotFound},
		{"/static/css/tekrar.css", http.StatusOK},
		{"/static/js/console.js", http.StatusOK},
		{"/static/css/nothing.css", http.StatusNotFound},
	} {
		r := e.Do(t, "GET", tt.path, "", nil)
		if r.Status != tt.want {
			t.Errorf("GET %s: %d, want %d %.200s", tt.path, r.Status, tt.want, r.Body)
		}
		if tt.want == http.StatusNotFound && (strings.Contains(string(r.Body), "<a href") || !strings.Contains(string(r.Body), `"code":"not_found"`)) {
			t.Errorf("GET %s: %.200s", tt.path, r.Body)
		}
	}
}

// signedIn reports whether b's session cookie still opens the console.
func signedIn(t *testing.T, b *browser) bool {
	t.Helper()
	switch p := b.do("GET", "/admin", nil); p.status {
	case http.StatusOK:
		return true
	case http.StatusSeeOther:
		return false
	default:
		t.Fatalf("GET /admin: %d", p.status)
		return false
	}
}

// TestPasswordResetEndsSessions: a reset kept the operator's sessions valid, so whoever
// had signed in with the old password stayed signed in.
func TestPasswordResetEndsSessions(t *testing.T) {
	e := apptest.New(t)
	ops1 := actSignIn(t, e, "ops@example.com", admin.RoleAdmin)
	ops2 := newBrowser(t, e)
	if p := ops2.login("ops@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("second sign-in: %d", p.status)
	}
	other := actSignIn(t, e, "other@example.com", admin.RoleViewer)
	if err := admin.SetOperator(t.Context(), e.DB, "ops@example.com", "a new password!", admin.RoleAdmin, bcrypt.MinCost); err != nil {
		t.Fatal(err)
	}
	if signedIn(t, ops1) || signedIn(t, ops2) {
		t.Error("a session opened with the old password still works")
	}
	if !signedIn(t, other) {
		t.Error("another operator's session ended")
	}
	if p := ops1.login("ops@example.com", "a new password!"); p.status != http.StatusSeeOther {
		t.Fatalf("sign-in with the new password: %d", p.status)
	}
}

// TestAdminEndsAnOperatorsSessions: nothing could revoke a session. An admin ends all of
// an operator's sessions from the operators page, through a confirmation form that carries
// the session's CSRF token and a nonce; it is recorded in the audit log, once per form.
func TestAdminEndsAnOperatorsSessions(t *testing.T) {
	e := apptest.New(t)
	adm := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	viewer := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	viewer2 := newBrowser(t, e)
	if p := viewer2.login("viewer@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("second sign-in: %d", p.status)
	}
	var viewerID int64
	if err := e.DB.Get(&viewerID, `SELECT id FROM operators WHERE email = 'viewer@example.com'`); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/admin/operators/%d/end-sessions", viewerID)

	// A viewer may neither see the operators nor end sessions.
	for _, p := range []page{viewer.do("GET", "/admin/operators", nil), viewer.do("GET", path, nil)} {
		if p.status != http.StatusForbidden {
			t.Errorf("a viewer: %d", p.status)
		}
	}
	list := adm.do("GET", "/admin/operators", nil)
	row := list.doc.Find(`tr:contains("viewer@example.com")`)
	if href, _ := row.Find("a").Attr("href"); href != path || !strings.Contains(row.Text(), "2") {
		t.Fatalf("operators page: link %q, row %q", href, row.Text())
	}
	confirm := adm.do("GET", path, nil)
	form := actForm(t, confirm, path)
	// Without the session's CSRF token, or from another origin, nothing ends.
	for name, p := range map[string]page{
		"without a token": adm.do("POST", path, url.Values{"nonce": form["nonce"]}),
		"cross-origin": adm.send("POST", path, "application/x-www-form-urlencoded", form.Encode(),
			"Origin", "https://evil.example"),
	} {
		if p.status != http.StatusForbidden {
			t.Errorf("%s: %d", name, p.status)
		}
	}
	if !signedIn(t, viewer) {
		t.Fatal("a refused form ended the sessions")
	}
	p := adm.do("POST", path, form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/admin/operators?done=sessions-ended" {
		t.Fatalf("end sessions: %d %s", p.status, p.header.Get("Location"))
	}
	if signedIn(t, viewer) || signedIn(t, viewer2) {
		t.Error("an ended session still works")
	}
	if !signedIn(t, adm) {
		t.Error("the admin's own session ended")
	}
	var audit []struct {
		Operator int64  `db:"operator_id"`
		Target   string `db:"target"`
		Detail   string `db:"detail"`
	}
	if err := e.DB.Select(&audit, `SELECT operator_id, target, detail::text AS detail FROM audit_log WHERE action = 'end_sessions'`); err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Target != fmt.Sprintf("operator:%d", viewerID) || !strings.Contains(audit[0].Detail, `"sessions": 2`) {
		t.Fatalf("audit %+v", audit)
	}
	// The same form again ends nothing more: the viewer, signed in again, stays signed in.
	if p := viewer.login("viewer@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("sign in again: %d", p.status)
	}
	if p := adm.do("POST", path, form); p.header.Get("Location") != "/admin/operators?done=sessions-ended-already" {
		t.Errorf("the form again: %d %s", p.status, p.header.Get("Location"))
	}
	if !signedIn(t, viewer) {
		t.Error("the form posted again ended a new session")
	}
	if n := countRows(t, e, `SELECT count(*) FROM audit_log WHERE action = 'end_sessions'`); n != 1 {
		t.Errorf("%d audit rows, want 1", n)
	}
	if p := adm.do("GET", "/admin/audit", nil); !strings.Contains(p.body, "end_sessions") {
		t.Error("the audit page does not show the action")
	}
}

// storeDown makes the test's database refuse connections and ends those open; the returned
// func lets them in again.
func storeDown(t *testing.T, e *apptest.Env) (up func()) {
	t.Helper()
	u, err := url.Parse(e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	adm, err := sqlx.Open("postgres", dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	set := func(allow bool) {
		t.Helper()
		// The name comes from the test helper, not from input; identifiers cannot be bound.
		if _, err := adm.Exec(`ALTER DATABASE "` + name + `" WITH ALLOW_CONNECTIONS ` + fmt.Sprint(allow)); err != nil {
			t.Fatal(err)
		}
		if !allow {
			if _, err := adm.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	set(false)
	return func() { set(true) }
}

// TestStoreDownIsSaidNotSignedOut: during a database outage a signed-in operator was sent
// to the sign-in page, as if signed out. They are told the store is down (503), and are
// still signed in once it is back.
func TestStoreDownIsSaidNotSignedOut(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "ops@example.com", admin.RoleAdmin)
	up := storeDown(t, e)
	for _, path := range []string{"/admin", "/admin/keys", "/admin/orders/1", "/admin/operators", "/admin/login"} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusServiceUnavailable || p.header.Get("Location") != "" || p.header.Get("Retry-After") == "" ||
			!strings.Contains(p.doc.Find("h1").Text(), "Database unavailable") {
			t.Errorf("GET %s with the store down: %d %q %.300s", path, p.status, p.header.Get("Location"), p.body)
		}
	}
	up()
	var ok bool
	for range 50 { // the pool's dead connections are replaced as they fail
		if ok = b.do("GET", "/admin", nil).status == http.StatusOK; ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ok {
		t.Fatal("not signed in once the store is back")
	}
}
