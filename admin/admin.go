package admin

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/operator"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/schedule"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/views"
)

// Deps is what the console needs from the process that serves it.
type Deps struct {
	// DB is the primary: every write, every read made in order to write (an action's form
	// and the action), the sign-in, sessions and CSRF, and the audit log.
	DB *sqlx.DB
	// Read is what the pages that only read (the key history, orders, charges, the lists and
	// searches of package report) read through: a standby when TEKRAR_READ_DATABASE_URL names
	// one, and then each such page says how far behind it is. Zero: the primary, DB. Only
	// handlers mounted on Register's reads group may use it (TestOnlyReadPagesUseTheReader).
	Read   report.Reader
	Logger *slog.Logger
	// SecureCookies marks cookies Secure even when the request did not arrive over TLS
	// (TLS ended at a proxy in front).
	SecureCookies bool
	Now           func() time.Time
	// DoubleTapWindow is the order search's default for how far apart two paid orders of
	// one customer, amount and items are flagged as a suspected double tap (0: 2 minutes).
	DoubleTapWindow time.Duration
	// Service is the checkout engine the API runs on. The console's actions go through it,
	// so that a refund from the console takes the very path of an API refund.
	Service *checkout.Service
	// Operator is what an operator may do to a key or an order (refund, release, expire),
	// on Service: the console's actions go through it.
	Operator *operator.Actions
	// Inbox is the provider inbox; the console replays its dead letters through it.
	Inbox *inbox.Inbox
	// Redeliver queues a webhook redelivery (nil: the console offers none).
	Redeliver Redeliverer
	// Resend resends a window of events to an endpoint (nil: the console offers none).
	Resend Resender
	// Tasks are the scheduled tasks this process runs, listed by /admin/schedule.
	Tasks []schedule.Task
}

type console struct {
	Deps
}

const (
	sessionCookie   = "tekrar_session"
	loginCSRFCookie = "tekrar_login_csrf"
	sessionKey      = "tekrar.session"
	contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

// Register mounts the console on g (the /admin group). It returns the console's not-found
// page, for the app to answer unknown console paths with (gin has one NoRoute per engine).
func Register(g *gin.RouterGroup, d Deps) (noRoute gin.HandlerFunc) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.DoubleTapWindow == 0 {
		d.DoubleTapWindow = defaultDoubleTapWindow
	}
	if d.Read == (report.Reader{}) {
		d.Read = report.PrimaryReader(d.DB)
	}
	c := &console{Deps: d}
	go dummyHash() // made now, so that the first sign-in of an unknown email does not wait for it
	g.Use(securityHeaders, sameOrigin, formsOnly, server.PlainText(nil))
	h := c.handle // every page, form and check answers its errors through it
	g.GET("/login", h(c.loginPage))
	g.POST("/login", h(c.login))
	authed := g.Group("", h(c.requireSession), h(c.checkCSRF))
	authed.Use(flash, zone)
	authed.POST("/logout", h(c.logout))
	// The pages that only read, through Read (a standby, when one is set), each with the
	// standby's lag in its header. What reads in order to write is in acts, on the primary.
	reads := authed.Group("", h(c.readFrom))
	reads.GET("", h(c.overview))
	reads.GET("/", h(c.overview))
	reads.GET("/keys", h(c.keys))
	reads.GET("/keys.csv", h(c.keysCSV))
	reads.GET("/keys/:client/:key", h(c.key))
	reads.GET("/replays", h(c.replays))
	reads.GET("/replays.csv", h(c.replaysCSV))
	reads.GET("/conflicts", h(c.conflicts))
	reads.GET("/conflicts.csv", h(c.conflictsCSV))
	reads.GET("/expirations", h(c.expirations))
	reads.GET("/orders", h(c.orders))
	reads.GET("/orders.csv", h(c.ordersCSV))
	reads.GET("/orders/pair", h(c.orderPair))
	reads.GET("/orders/:id", h(c.order))
	reads.GET("/inbox", h(c.inbox))
	reads.GET("/inbox.csv", h(c.inboxCSV))
	reads.GET("/disputes", h(c.disputes))
	reads.GET("/compensations", h(c.compensations))
	reads.GET("/reconciliation", h(c.reconciliation))
	reads.GET("/settlements", h(c.settlements))
	reads.GET("/settlements.csv", h(c.settlementsCSV))
	reads.GET("/settlements/adjustments.csv", h(c.adjustmentsCSV))
	reads.GET("/settlements/:client/:day", h(c.settlementDay))
	reads.GET("/settlements/:client/:day/movements.csv", h(c.settlementMovementsCSV))
	reads.GET("/products", h(c.products))
	reads.GET("/products/:client/:sku", h(c.product))
	reads.GET("/registers", h(c.registers))
	reads.GET("/events", h(c.outboxEvents))
	reads.GET("/search", h(c.search))
	reads.GET("/registers/oversold", h(c.oversoldSales))
	// An endpoint's page reads the primary (below); its export, a read only, the reader.
	reads.GET("/webhooks/:id/deliveries.csv", h(c.endpointDeliveriesCSV))
	// Read on the primary: the console's own tables, the scheduler's and the deliveries'.
	authed.GET("/audit", h(c.audit))
	authed.GET("/schedule", h(c.schedulePage))
	authed.GET("/webhooks", h(c.webhooks))
	authed.GET("/webhooks/:id", h(c.webhookEndpoint))
	authed.GET("/receipts", h(c.receiptsPage))
	authed.GET("/receipts/:event", h(c.receiptPage))
	authed.GET("/receipts/:event/html", h(c.receiptPreview))
	acts := authed.Group("", h(c.requireAdmin))
	acts.GET("/orders/:id/refund", h(c.refundForm))
	acts.POST("/orders/:id/refund", h(c.refund))
	acts.GET("/keys/:client/:key/release", h(c.releaseForm))
	acts.POST("/keys/:client/:key/release", h(c.release))
	acts.GET("/keys/:client/:key/expire", h(c.expireForm))
	acts.POST("/keys/:client/:key/expire", h(c.expire))
	acts.GET("/webhooks/deliveries/:delivery/redeliver", h(c.redeliverForm))
	acts.POST("/webhooks/deliveries/:delivery/redeliver", h(c.redeliver))
	acts.GET("/webhooks/:id/resend", h(c.resendForm))
	acts.POST("/webhooks/:id/resend", h(c.resend))
	acts.GET("/inbox/dead/:id/replay", h(c.replayForm))
	acts.POST("/inbox/dead/:id/replay", h(c.replay))
	acts.GET("/operators", h(c.operators))
	acts.GET("/operators/:id/end-sessions", h(c.endSessionsForm))
	acts.POST("/operators/:id/end-sessions", h(c.endSessions))
	return h(func(ctx *gin.Context) error {
		setSecurityHeaders(ctx.Writer.Header())
		return notFound(noSuchPage)
	})
}

// securityHeaders: a strict CSP (no inline script or style anywhere in the console), no
// framing, no sniffing, no referrer leaking keys in URLs to other sites.
func securityHeaders(c *gin.Context) {
	setSecurityHeaders(c.Writer.Header())
	c.Next()
}

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurity)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// crossOrigin refuses requests that a browser says come from another site (Sec-Fetch-Site),
// or whose Origin is not the console's host.
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin refuses a state-changing request from another origin (403), beside the CSRF
// token that every console form carries. A browser sends Origin with every form it posts;
// without one, a Referer must name the console's host. A request with neither is let
// through (an older browser, or a client that is not a browser) and the CSRF token alone
// guards it. The host compared is the request's Host: a proxy in front must pass it on.
func sameOrigin(c *gin.Context) {
	r := c.Request
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
		c.Next()
		return
	}
	ok := crossOrigin.Check(r) == nil
	if ok && r.Header.Get("Origin") == "" {
		if ref := r.Header.Get("Referer"); ref != "" {
			u, err := url.Parse(ref)
			ok = err == nil && u.Host == r.Host && (u.Scheme == "http" || u.Scheme == "https")
		}
	}
	if !ok {
		server.Abort(c, problem.Of(problem.CodeCrossOriginRequest).
			WithDetail("the console accepts forms only from its own pages"))
		return
	}
	c.Next()
}

// formsOnly refuses a state-changing request whose body is not a URL-encoded form (415),
// before anything reads it. The console's forms are all URL-encoded; multipart/form-data
// was parsed without a size limit, spooled files to disk and skipped the text checks, all
// before authentication on the sign-in form.
func formsOnly(c *gin.Context) {
	r := c.Request
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
		c.Next()
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		server.Abort(c, problem.Of(problem.CodeUnsupportedMediaType).
			WithDetail("a console form must be application/x-www-form-urlencoded"))
		return
	}
	c.Next()
}

// render writes a component, rendered to a buffer first so that an error never sends half
// a page.
func (a *console) render(c *gin.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request.Context(), &buf); err != nil {
		return fmt.Errorf("render console page: %w", err)
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
	return nil
}

func (a *console) setCookie(c *gin.Context, name, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: name, Value: value, Path: "/admin", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: a.SecureCookies || c.Request.TLS != nil,
	})
}

// safeNext keeps a post-login redirect inside the console: no open redirect, and no path
// that leaves /admin once cleaned (http.Redirect cleans "/admin/../x" to "/x"). The path,
// decoded, is cleaned of dot segments and must then be /admin or under /admin/; a next with
// a scheme, a host, "//", a backslash or a control character is refused. Anything refused
// goes to /admin.
func safeNext(next string) string {
	const home = "/admin"
	if !strings.HasPrefix(next, "/") || strings.Contains(next, "//") || strings.ContainsFunc(next, unsafeInNext) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.ContainsFunc(u.Path, unsafeInNext) {
		return home
	}
	clean := path.Clean(u.Path)
	if clean != home && !strings.HasPrefix(clean, home+"/") {
		return home
	}
	if strings.HasSuffix(u.Path, "/") {
		clean += "/"
	}
	out := &url.URL{Path: clean, RawQuery: u.RawQuery}
	if u.Path == clean {
		// Already clean: keep it as it was escaped (a key may hold an escaped "/").
		out.Path, out.RawPath = u.Path, u.RawPath
	}
	return out.RequestURI()
}

func unsafeInNext(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }

func (a *console) loginPage(c *gin.Context) error {
	s, err := LookupSession(c.Request.Context(), a.DB, cookie(c, sessionCookie), a.Now())
	switch {
	case err == nil && s.Operator.ID != 0:
		c.Redirect(http.StatusSeeOther, "/admin")
		return nil
	case db.IsUnavailable(err):
		return err // a form that cannot work: say why instead
	}
	token := randomToken()
	a.setCookie(c, loginCSRFCookie, token, 3600)
	return a.render(c, http.StatusOK, views.LoginPage(token, safeNext(c.Query("next")), "", ""))
}

func (a *console) login(c *gin.Context) error {
	email, next := c.PostForm("email"), safeNext(c.PostForm("next"))
	// The login form has no session yet: its CSRF token is a cookie that a cross-site form
	// cannot read or set, repeated in the form.
	if !sameToken(cookie(c, loginCSRFCookie), c.PostForm("csrf")) {
		return forbidden("The sign-in form expired or was not this console's: reload the sign-in page and sign in again.")
	}
	token, err := Login(c.Request.Context(), a.DB, email, c.PostForm("password"), c.Request.UserAgent(), c.ClientIP(), a.Now())
	if err != nil {
		status, msg := http.StatusUnauthorized, ErrBadLogin.Error()
		switch {
		case errors.Is(err, ErrThrottled):
			status, msg = http.StatusTooManyRequests, err.Error()
		case errors.Is(err, ErrBusy):
			c.Header("Retry-After", "1")
			status, msg = http.StatusServiceUnavailable, err.Error()
		case !errors.Is(err, ErrBadLogin):
			a.Logger.Error("sign-in failed", "err", err, "request_id", server.RequestID(c))
			status, msg = http.StatusServiceUnavailable, "sign-in is unavailable right now"
		}
		a.Logger.Info("console sign-in refused", "reason", msg, "request_id", server.RequestID(c))
		fresh := randomToken()
		a.setCookie(c, loginCSRFCookie, fresh, 3600)
		return a.render(c, status, views.LoginPage(fresh, next, email, msg))
	}
	a.setCookie(c, loginCSRFCookie, "", -1)
	a.setCookie(c, sessionCookie, token, int(sessionTTL.Seconds()))
	c.Redirect(http.StatusSeeOther, next)
	return nil
}

func (a *console) logout(c *gin.Context) error {
	if err := Logout(c.Request.Context(), a.DB, cookie(c, sessionCookie)); err != nil {
		a.Logger.Warn("sign-out", "err", err)
	}
	a.setCookie(c, sessionCookie, "", -1)
	c.Redirect(http.StatusSeeOther, "/admin/login")
	return nil
}

// requireSession sends a signed-out operator to the sign-in page.
func (a *console) requireSession(c *gin.Context) error {
	s, err := LookupSession(c.Request.Context(), a.DB, cookie(c, sessionCookie), a.Now())
	if err != nil {
		c.Abort()
		if !errors.Is(err, ErrNoSession) {
			// Whether the operator is signed in is not known: sending them to sign in would
			// tell them their session ended, and signing in would fail too.
			return err
		}
		c.Redirect(http.StatusSeeOther, "/admin/login?next="+url.QueryEscape(c.Request.URL.RequestURI()))
		return nil
	}
	c.Set(sessionKey, s)
	c.Next()
	return nil
}

// checkCSRF refuses any state-changing request whose token (form field csrf, or the
// X-CSRF-Token header htmx sends) is not the session's.
func (a *console) checkCSRF(c *gin.Context) error {
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		c.Next()
		return nil
	}
	s := session(c)
	token := c.GetHeader("X-CSRF-Token")
	if token == "" {
		token = c.PostForm("csrf")
	}
	if !sameToken(token, s.CSRF) {
		return forbidden("The form expired or was not sent from this console: nothing was done. Go back, reload the page and try again.")
	}
	c.Next()
	return nil
}

func session(c *gin.Context) Session { return c.MustGet(sessionKey).(Session) }

func cookie(c *gin.Context, name string) string {
	v, err := c.Cookie(name)
	if err != nil {
		return ""
	}
	return v
}

func nav(c *gin.Context, active string) views.Nav {
	s := session(c)
	return views.Nav{Email: s.Operator.Email, Role: s.Operator.Role, CSRF: s.CSRF, Active: active, CanAct: s.Operator.CanAct()}
}
