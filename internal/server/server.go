// Package server is the HTTP plumbing every tekrar route shares: request ids, one log line
// per request, panic recovery, a liveness probe, problem responses for unknown routes, and a
// graceful shutdown. The routes themselves belong to checkout/api and admin; what else an
// app serves (static files, readiness) it adds where it is assembled (internal/app).
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/problem"
)

// Option configures NewEngine.
type Option func(*gin.Engine) error

// TrustedProxies names the CIDRs whose X-Forwarded-For is believed when recording a client's
// address; none by default, so that no client can forge its address in the key history.
func TrustedProxies(cidrs []string) Option {
	return func(e *gin.Engine) error {
		if err := e.SetTrustedProxies(cidrs); err != nil {
			return fmt.Errorf("trusted proxies: %w", err)
		}
		return nil
	}
}

// Outermost puts h before the shared middleware, around everything else: the request
// metrics use it so that they also see the 500 the panic recovery writes.
func Outermost(h gin.HandlerFunc) Option {
	return func(e *gin.Engine) error {
		e.Use(h)
		return nil
	}
}

// NewEngine returns a gin engine with the shared middleware, /healthz, and problem answers
// for unknown routes and methods. What an app serves besides (its routes, static files,
// readiness, gin's mode) is the app's to add where it is assembled.
func NewEngine(logger *slog.Logger, opts ...Option) (*gin.Engine, error) {
	e := gin.New()
	if err := e.SetTrustedProxies(nil); err != nil {
		return nil, fmt.Errorf("trusted proxies: %w", err)
	}
	for _, opt := range opts {
		if err := opt(e); err != nil {
			return nil, err
		}
	}
	e.HandleMethodNotAllowed = true
	e.RemoveExtraSlash = true
	e.ContextWithFallback = true
	// Match on the raw path so that a percent-encoded "/" inside an idempotency key stays in
	// its segment; parameters are still unescaped.
	e.UseRawPath = true
	e.UnescapePathValues = true
	e.Use(requestID(), noStore, accessLog(logger), recovery(logger), refuseSmuggling)

	e.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.NoRoute(func(c *gin.Context) { Abort(c, problem.NotFound()) })
	e.NoMethod(func(c *gin.Context) { Abort(c, problem.MethodNotAllowed()) })
	return e, nil
}

// Ready answers /readyz: 200 when check succeeds within timeout, else 503 store_unavailable,
// whose detail says so when the database answered as a standby (ErrReadOnly). The check runs on
// its own goroutine and is abandoned when the probe's time is up: a frozen database answers
// neither a query nor lib/pq's cancel request.
func Ready(logger *slog.Logger, timeout time.Duration, check func(context.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), timeout)
		defer cancel()
		checked := make(chan error, 1)
		go func() { checked <- check(ctx) }()
		var err error
		select {
		case err = <-checked:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if errors.Is(err, ErrReadOnly) {
			logger.Warn("readiness: database is read-only", "request_id", RequestID(c))
			Abort(c, problem.Of(problem.CodeStoreUnavailable).WithDetail(ErrReadOnly.Error()))
			return
		}
		if err != nil {
			logger.Warn("readiness: database unreachable", "err", err, "request_id", RequestID(c))
			Abort(c, problem.Of(problem.CodeStoreUnavailable)) // with the table's Retry-After
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	}
}

// Files serves an asset tree's files and hides its directories (http.FileServer would list
// them): a directory is answered like any unknown path.
func Files(fsys fs.FS) http.FileSystem { return http.FS(filesOnly{fsys}) }

// HeadAsGet answers HEAD like GET without a body, as RFC 9110 asks of every GET resource:
// the router sees a GET, and net/http discards the body it writes because the request it
// answers is still a HEAD.
func HeadAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			r = r.Clone(r.Context())
			r.Method = http.MethodGet
		}
		next.ServeHTTP(w, r)
	})
}

// filesOnly serves an asset tree's files and hides its directories: http.FileServer would
// list a directory's files. A directory is not found, so it is answered like any unknown
// path (404 not_found).
type filesOnly struct{ fs.FS }

func (f filesOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := file.Stat(); err != nil || st.IsDir() {
		file.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return file, nil
}

// noStore marks every response but a static file Cache-Control: no-store. API answers
// (orders, replays, problems) carry customer data and idempotency state that a shared or
// browser cache must not keep or serve to another request; set here, before routing, it
// also covers 404, 405 and the refusals of middleware.
func noStore(c *gin.Context) {
	if !strings.HasPrefix(c.Request.URL.Path, "/static/") {
		c.Header("Cache-Control", "no-store")
	}
	c.Next()
}

// Abort writes p as the response and stops the handler chain.
func Abort(c *gin.Context, p *problem.Problem) {
	c.Abort()
	c.Set(problemKey, p)
	if p.Status >= 500 {
		c.Set(logProblemKey, string(p.Code)) // a string: the access log reads it with GetString
	}
	problem.Write(c.Writer, c.Request, p)
}

// ProblemOf is the problem the request was answered with (by Abort), or nil: what the
// request metrics read a refusal's code from.
func ProblemOf(c *gin.Context) *problem.Problem {
	p, _ := c.Get(problemKey)
	pr, _ := p.(*problem.Problem)
	return pr
}

// Run serves h on addr until ctx is cancelled, then stops accepting, lets in-flight requests
// finish for at most grace, and returns. ready, if not nil, receives the bound address.
func Run(ctx context.Context, addr string, h http.Handler, grace time.Duration, logger *slog.Logger, ready func(net.Addr)) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, h, grace, logger, ready)
}

// Listen binds addr for Serve. A command binds before it opens a database or starts a
// Postgres, so that a busy or forbidden port stops it at once, and before it says it is
// serving.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return WrapListener(ln), nil
}

// Serve is Run on a listener bound already (Listen); it closes ln.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, logger *slog.Logger, ready func(net.Addr)) error {
	srv := NewHTTPServer(h)
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing in-flight requests", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
