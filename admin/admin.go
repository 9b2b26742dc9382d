package admin

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/views"
)

// Deps is what the console needs from the process that serves it.
type Deps struct {
	DB     *sqlx.DB
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

// Register mounts the console on g (the /admin group).
func Register(g *gin.RouterGroup, d Deps) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.DoubleTapWindow == 0 {
		d.DoubleTapWindow = defaultDoubleTapWindow
	}
	c := &console{Deps: d}
	g.Use(securityHeaders, server.PlainText(nil))
	g.GET("/login", c.loginPage)
	g.POST("/login", c.login)
	authed := g.Group("", c.requireSession, c.checkCSRF)
	authed.Use(flash, zone)
	authed.POST("/logout", c.logout)
	authed.GET("", c.overview)
	authed.GET("/", c.overview)
	authed.GET("/keys", c.keys)
	authed.GET("/keys/:client/:key", c.key)
	authed.GET("/replays", c.replays)
	authed.GET("/conflicts", c.conflicts)
	authed.GET("/expirations", c.expirations)
	authed.GET("/orders", c.orders)
	authed.GET("/orders/pair", c.orderPair)
	authed.GET("/orders/:id", c.order)
	authed.GET("/audit", c.audit)
	acts := authed.Group("", c.requireAdmin)
	acts.GET("/orders/:id/refund", c.refundForm)
	acts.POST("/orders/:id/refund", c.refund)
	acts.GET("/keys/:client/:key/release", c.releaseForm)
	acts.POST("/keys/:client/:key/release", c.release)
	acts.GET("/keys/:client/:key/expire", c.expireForm)
	acts.POST("/keys/:client/:key/expire", c.expire)
}

// securityHeaders: a strict CSP (no inline script or style anywhere in the console), no
// framing, no sniffing, no referrer leaking keys in URLs to other sites.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", contentSecurity)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.Next()
}

// render writes a component, rendered to a buffer first so that an error never sends half
// a page.
func (a *console) render(c *gin.Context, status int, comp templ.Component) {
	var buf bytes.Buffer
	if err := comp.Render(c.Request.Context(), &buf); err != nil {
		a.Logger.Error("render console page", "err", err, "request_id", server.RequestID(c))
		c.String(http.StatusInternalServerError, "internal error (request %s)", server.RequestID(c))
		return
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

func (a *console) setCookie(c *gin.Context, name, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: name, Value: value, Path: "/admin", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: a.SecureCookies || c.Request.TLS != nil,
	})
}

// safeNext keeps a post-login redirect inside the console: no open redirect.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, "/admin") || strings.HasPrefix(next, "//") {
		return "/admin"
	}
	return u.RequestURI()
}

func (a *console) loginPage(c *gin.Context) {
	if s, err := LookupSession(c.Request.Context(), a.DB, cookie(c, sessionCookie), a.Now()); err == nil && s.Operator.ID != 0 {
		c.Redirect(http.StatusSeeOther, "/admin")
		return
	}
	token := randomToken()
	a.setCookie(c, loginCSRFCookie, token, 3600)
	a.render(c, http.StatusOK, views.LoginPage(token, safeNext(c.Query("next")), "", ""))
}

func (a *console) login(c *gin.Context) {
	email, next := c.PostForm("email"), safeNext(c.PostForm("next"))
	// The login form has no session yet: its CSRF token is a cookie that a cross-site form
	// cannot read or set, repeated in the form.
	if !sameToken(cookie(c, loginCSRFCookie), c.PostForm("csrf")) {
		a.errorPage(c, http.StatusForbidden, "The sign-in form expired or was not this console's: reload the sign-in page and sign in again.")
		return
	}
	token, err := Login(c.Request.Context(), a.DB, email, c.PostForm("password"), c.Request.UserAgent(), c.ClientIP(), a.Now())
	if err != nil {
		status, msg := http.StatusUnauthorized, ErrBadLogin.Error()
		switch {
		case errors.Is(err, ErrThrottled):
			status, msg = http.StatusTooManyRequests, err.Error()
		case !errors.Is(err, ErrBadLogin):
			a.Logger.Error("sign-in failed", "err", err, "request_id", server.RequestID(c))
			status, msg = http.StatusServiceUnavailable, "sign-in is unavailable right now"
		}
		a.Logger.Info("console sign-in refused", "reason", msg, "request_id", server.RequestID(c))
		fresh := randomToken()
		a.setCookie(c, loginCSRFCookie, fresh, 3600)
		a.render(c, status, views.LoginPage(fresh, next, email, msg))
		return
	}
	a.setCookie(c, loginCSRFCookie, "", -1)
	a.setCookie(c, sessionCookie, token, int(sessionTTL.Seconds()))
	c.Redirect(http.StatusSeeOther, next)
}

func (a *console) logout(c *gin.Context) {
	if err := Logout(c.Request.Context(), a.DB, cookie(c, sessionCookie)); err != nil {
		a.Logger.Warn("sign-out", "err", err)
	}
	a.setCookie(c, sessionCookie, "", -1)
	c.Redirect(http.StatusSeeOther, "/admin/login")
}

// requireSession sends a signed-out operator to the sign-in page.
func (a *console) requireSession(c *gin.Context) {
	s, err := LookupSession(c.Request.Context(), a.DB, cookie(c, sessionCookie), a.Now())
	if err != nil {
		if !errors.Is(err, ErrNoSession) {
			a.Logger.Error("console session", "err", err, "request_id", server.RequestID(c))
		}
		c.Abort()
		c.Redirect(http.StatusSeeOther, "/admin/login?next="+url.QueryEscape(c.Request.URL.RequestURI()))
		return
	}
	c.Set(sessionKey, s)
	c.Next()
}

// checkCSRF refuses any state-changing request whose token (form field csrf, or the
// X-CSRF-Token header htmx sends) is not the session's.
func (a *console) checkCSRF(c *gin.Context) {
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		c.Next()
		return
	}
	s := session(c)
	token := c.GetHeader("X-CSRF-Token")
	if token == "" {
		token = c.PostForm("csrf")
	}
	if !sameToken(token, s.CSRF) {
		a.errorPage(c, http.StatusForbidden, "The form expired or was not sent from this console: nothing was done. Go back, reload the page and try again.")
		return
	}
	c.Next()
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
