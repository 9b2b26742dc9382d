package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestLogsCarryNoSecrets runs `tekrar serve` and `tekrar psp` at debug level through the
// paths that log (a refused secret, approvals, a decline, a provider failure, a provider
// timeout, a replay, a refund, bad input, the console's sign-in) and then reads every line
// both processes wrote. None may hold a client secret (right or wrong), the database
// password, the SMTP password, a card token, customer data (an SMTP server's reply quoting
// the customer's address included), an operator's password, a session cookie or a CSRF
// token.
func TestLogsCarryNoSecrets(t *testing.T) {
	const smtpPassword = "smtp-pw-5c1e77ab"
	t.Parallel()
	dbURL := withPassword(t, dbtest.NewURL(t), "db-pw-8f3a91c2")
	db := openDB(t, dbURL)
	ports := freePorts(t, 2)
	pspAddr := addrOf(ports[1])
	psp := startTekrar(t, childEnv("DATABASE_URL="+dbURL, "TEKRAR_PSP_ADDR="+pspAddr), nil, "psp")
	proctest.WaitUp(t, psp.Proc, "http://"+pspAddr, "/charges/none", 30*time.Second)
	// Receipts go to an SMTP server that wants a password and refuses the first one with a
	// reply that quotes the address: neither may reach the log.
	mb := receiptstest.New(t, "smtp-user", smtpPassword)
	serve, base := startServe(t, dbURL, ports[0], "TEKRAR_LOG_LEVEL=debug",
		"TEKRAR_PSP_URL=http://"+pspAddr, "TEKRAR_PROVIDER_TIMEOUT=500ms", "TEKRAR_OUTBOX_POLL=100ms",
		fmt.Sprintf("TEKRAR_SMTP_URL=smtp://smtp-user:%s@127.0.0.1:%d", smtpPassword, mb.Server.Port))
	c := newHTTPClient()
	secret := newClientSecret(t, dbURL, "log app")

	const (
		wrongSecret = "tekrar_sk_wrongwrongwrong0f9e8d7c"
		email       = "ayse.logcheck@example.com"
		customerID  = "cus_logcheck_77"
		deviceID    = "device-logcheck-5512"
		opPassword  = "log check horse battery"
	)
	mb.FailNext(&smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 2, 0}, Message: "mailbox of " + email + " is busy"})
	order := func(token string, amount int64) []byte {
		return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":%d}],`+
			`"amount":%d,"payment":{"card_token":%q},"customer":{"id":%q,"email":%q},"metadata":{"device_id":%q}}`,
			amount, amount, token, customerID, email, deviceID))
	}
	expect := func(r response, status int, what string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d, want %d: %s", what, r.Status, status, r.Body)
		}
	}

	expect(mustSend(t, c, "GET", base+"/v1/client", wrongSecret, nil), 401, "wrong secret")
	paid := mustSend(t, c, "POST", base+"/v1/orders", secret, order("tok_visa", 9000), "Idempotency-Key", "log-paid")
	expect(paid, 201, "tok_visa")
	expect(mustSend(t, c, "POST", base+"/v1/orders", secret, order("tok_visa", 9000), "Idempotency-Key", "log-paid"), 201, "replay")
	expect(mustSend(t, c, "POST", base+"/v1/orders", secret, order("tok_visa", 9001), "Idempotency-Key", "log-paid"), 422, "reused key")
	expect(mustSend(t, c, "POST", base+"/v1/orders", secret, order("tok_declined", 500), "Idempotency-Key", "log-declined"), 402, "tok_declined")
	expect(mustSend(t, c, "POST", base+"/v1/orders", secret, order("tok_fail", 600), "Idempotency-Key", "log-fail"), 503, "tok_fail")
	expect(mustSend(t, c, "POST", base+"/v1/orders", secret, order("tok_timeout", 700), "Idempotency-Key", "log-timeout"), 503, "tok_timeout")
	bad := []byte(`{"currency":"try","amount":-1,"payment":{"card_token":"tok_visa"},"customer":{"email":"` + email + `"}}`)
	expect(mustSend(t, c, "POST", base+"/v1/orders", secret, bad, "Idempotency-Key", "log-bad"), 422, "invalid order")
	expect(mustSend(t, c, "POST", base+"/v1/orders", secret, []byte(`{"payment":{"card_token":"tok_visa"`), "Idempotency-Key", "log-bad"), 400, "malformed JSON")
	var o struct{ ID string }
	if err := json.Unmarshal(paid.Body, &o); err != nil || o.ID == "" {
		t.Fatalf("order body %s: %v", paid.Body, err)
	}
	expect(mustSend(t, c, "POST", base+"/v1/orders/"+o.ID+"/refunds", secret, []byte(`{"amount":1000,"reason":"customer `+email+`"}`),
		"Idempotency-Key", "log-refund"), 201, "refund")
	expect(mustSend(t, c, "GET", base+"/v1/idempotency-keys/log-timeout", secret, nil), 200, "key status")

	// The console: a failed and a successful sign-in, a page, and a sign-out.
	mustRun(t, childEnv("DATABASE_URL="+dbURL), strings.NewReader(opPassword+"\n"), "operators", "create", "--role", "admin", "ops@example.com")
	jar, _ := cookiejar.New(nil)
	bc := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := func(path string, v url.Values) int {
		t.Helper()
		r, err := bc.PostForm(base+path, v)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	loginCSRF := csrfOf(t, bc, base+"/admin/login")
	if s := form("/admin/login", url.Values{"csrf": {loginCSRF}, "email": {"ops@example.com"}, "password": {"not " + opPassword}}); s != 401 {
		t.Fatalf("wrong password: %d", s)
	}
	loginCSRF = csrfOf(t, bc, base+"/admin/login")
	if s := form("/admin/login", url.Values{"csrf": {loginCSRF}, "email": {"ops@example.com"}, "password": {opPassword}}); s != 303 {
		t.Fatalf("sign-in: %d", s)
	}
	sessionCSRF := csrfOf(t, bc, base+"/admin")
	var session string
	for _, ck := range jar.Cookies(mustURL(t, base+"/admin")) {
		if ck.Name == "tekrar_session" {
			session = ck.Value
		}
	}
	if session == "" {
		t.Fatal("no session cookie after signing in")
	}
	if s := form("/admin/logout", url.Values{"csrf": {sessionCSRF}}); s != 303 {
		t.Fatalf("sign-out: %d", s)
	}

	// The receipts of the payment (sent again after the refusal) and of the refund.
	waitCtx, cancelWait := context.WithTimeout(context.Background(), time.Minute)
	defer cancelWait()
	mb.Wait(waitCtx, 2)

	// Everything is written by the time both have exited.
	if n := countRows(t, db, `SELECT count(*) FROM orders`); n != 4 {
		t.Errorf("%d orders, want 4 (paid, declined, failed, timed out)", n)
	}
	for _, p := range []*proc{serve, psp} {
		p.signal(t, syscall.SIGTERM)
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("tekrar %v exited %d\nstderr:\n%s", p.cmd.Args[1:], code, p.stderr)
		}
	}
	logs := map[string]string{"serve": serve.stderr.String(), "psp": psp.stderr.String()}

	// The logs are there to be read: they say what happened, so the absence below means
	// something.
	for name, want := range map[string][]string{
		"serve": {`"status":401`, `"status":402`, `"problem":"payment_pending"`, "provider outcome unknown", `"route":"/admin/login"`},
		"psp":   {"psp: provider error", "request ended before the provider answered"},
	} {
		for _, w := range want {
			if !strings.Contains(logs[name], w) {
				t.Errorf("%s log has no %q; log:\n%s", name, w, logs[name])
			}
		}
	}
	secrets := map[string]string{
		"client secret":        secret,
		"client secret's body": strings.TrimPrefix(secret, "tekrar_sk_"),
		"refused secret":       wrongSecret,
		"database password":    "db-pw-8f3a91c2",
		"SMTP password":        smtpPassword,
		"card token":           "tok_",
		"customer email":       email,
		"customer id":          customerID,
		"metadata":             deviceID,
		"operator password":    opPassword,
		"session cookie":       session,
		"sign-in CSRF token":   loginCSRF,
		"session CSRF token":   sessionCSRF,
		"Authorization header": "Bearer",
		"request body":         `"amount":`,
	}
	for name, log := range logs {
		for what, s := range secrets {
			if i := strings.Index(log, s); i >= 0 {
				t.Errorf("%s log holds the %s: …%s…", name, what, log[max(0, i-120):min(len(log), i+len(s)+40)])
			}
		}
	}
}

// withPassword returns u with a password for its user, which a trust-authenticated test
// server ignores, so that a log line holding the connection string would show it. A URL
// that already has a password is returned as it is.
func withPassword(t *testing.T, u, pw string) string {
	t.Helper()
	p := mustURL(t, u)
	if _, has := p.User.Password(); has {
		return u
	}
	user := "postgres"
	if p.User != nil && p.User.Username() != "" {
		user = p.User.Username()
	}
	p.User = url.UserPassword(user, pw)
	return p.String()
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var csrfInput = regexp.MustCompile(`name="?csrf"?[^>]*value="([^"]+)"|value="([^"]+)"[^>]*name="?csrf"?`)

// csrfOf reads the CSRF token of the first form on the page at u.
func csrfOf(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	r, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := csrfInput.FindSubmatch(body)
	if m == nil {
		t.Fatalf("GET %s: %d, no csrf field", u, r.StatusCode)
	}
	return string(m[1]) + string(m[2])
}
