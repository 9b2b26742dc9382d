// Package apptest runs a whole tekrar, as `tekrar serve` assembles it, over HTTP on a fresh
// test database, for tests that want to see what a client sees.
package apptest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/server"
)

// Env is one running tekrar and its database.
type Env struct {
	URL string
	// MetricsURL serves the app's Prometheus metrics (/metrics), as TEKRAR_METRICS_ADDR does.
	MetricsURL string
	DB         *sqlx.DB
	DBURL      string
	Config     config.Server
	Clock      *Clock
	App        *app.App
	// Secret authenticates as ClientID, a client created for the test.
	Secret   string
	ClientID int64
	// HTTP is the client Do and Send use, and any test that builds its own requests should:
	// it checks every exchange under /v1 and /webhooks against the OpenAPI document
	// (contract.go) and fails the test on a violation.
	HTTP *http.Client
}

// Defaults returns the configuration `tekrar serve` runs with when nothing is set.
func Defaults(t testing.TB) config.Server {
	t.Helper()
	cfg, err := config.LoadServer("serve", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// New starts tekrar on a fresh database. change, if given, adjusts the configuration.
func New(t testing.TB, change ...func(*config.Server)) *Env {
	t.Helper()
	return NewWith(t, nil, change...)
}

// NewWith is New with a crash hook (see app.WithCrashHook); nil for none.
func NewWith(t testing.TB, crash func(point string), change ...func(*config.Server)) *Env {
	t.Helper()
	cfg := Defaults(t)
	cfg.SandboxSlowDelay = 300 * time.Millisecond
	for _, c := range change {
		c(&cfg)
	}
	url := dbtest.NewURL(t)
	clock := &Clock{}
	e := serve(t, cfg, url, clock, crash)
	e.Secret, e.ClientID = e.NewClient(t, "test app")
	return e
}

// Peer starts a second tekrar on e's database, with its own connection pool and its own
// engine, as a second process of one deployment: what two servers racing for the same rows
// need. It shares e's clock and client.
func (e *Env) Peer(t testing.TB) *Env {
	t.Helper()
	p := serve(t, e.Config, e.DBURL, e.Clock, nil)
	p.Secret, p.ClientID = e.Secret, e.ClientID
	return p
}

// serve opens a pool on url and serves a tekrar on it until the test ends.
func serve(t testing.TB, cfg config.Server, url string, clock *Clock, crash func(point string)) *Env {
	t.Helper()
	db, err := tdb.Open(context.Background(), url, cfg.DBMaxConns, tdb.StallTimeout(cfg.DBTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("TEKRAR_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.DatabaseURL = url // as serve's: the replay cache's listener connects to it
	a, err := app.New(cfg, db, logger, app.WithClock(clock.Now), app.WithCrashHook(crash))
	if err != nil {
		t.Fatal(err)
	}
	// Served as `tekrar serve` serves it: its http.Server settings and connections.
	srv := httptest.NewUnstartedServer(a.Handler)
	srv.Config = server.NewHTTPServer(a.Handler)
	srv.Listener = server.WrapListener(srv.Listener)
	srv.Start()
	msrv := httptest.NewServer(a.Metrics.Mux())
	t.Cleanup(func() {
		msrv.Close()
		srv.Close()
		a.Close()
	})
	hc := &http.Client{Transport: &checkedTransport{next: http.DefaultTransport, report: t.Errorf}}
	return &Env{URL: srv.URL, MetricsURL: msrv.URL, DB: db, DBURL: url, Config: cfg, Clock: clock, App: a, HTTP: hc}
}

// NewClient creates another API client and returns its secret and id.
func (e *Env) NewClient(t testing.TB, name string) (string, int64) {
	t.Helper()
	secret := clients.NewSecret()
	c, err := clients.Create(context.Background(), e.DB, name, secret)
	if err != nil {
		t.Fatal(err)
	}
	return secret, c.ID
}

// ProviderCustomer is the provider's customer id of client clientID's customer, as the
// client's backend saves cards under it (clients.Client.ProviderCustomer): read from the
// client's row, as the prefix is the client's own stored value.
func (e *Env) ProviderCustomer(t testing.TB, clientID int64, customer string) string {
	t.Helper()
	c, _, err := clients.Get(context.Background(), e.DB, clientID)
	if err != nil {
		t.Fatal(err)
	}
	return c.ProviderCustomer(customer)
}

// Response is an HTTP response with its body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request. headers are name/value pairs; the secret, when not empty, goes in
// Authorization.
func (e *Env) Do(t testing.TB, method, path, secret string, body []byte, headers ...string) Response {
	t.Helper()
	r, err := e.Send(method, path, secret, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Send is Do for goroutines, which must not call t.Fatal.
func (e *Env) Send(method, path, secret string, body []byte, headers ...string) (Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		return Response{}, err
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Clock is a settable clock; until set it follows the wall clock.
type Clock struct {
	mu      sync.Mutex
	off     time.Duration
	stopped bool
	at      time.Time // where Stop stopped it
}

// Now is the wall clock (or where Stop stopped it) moved by everything Advance added.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.at.Add(c.off)
	}
	return time.Now().Add(c.off)
}

// Stop stops the clock where it is, to the microsecond as Postgres keeps times, for tests
// that need an exact instant (an expiry boundary); Advance still moves it. It returns the
// time it stopped at.
func (c *Clock) Stop() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.off, c.stopped = time.Now().Add(c.off).Truncate(time.Microsecond), 0, true
	return c.at
}

// Resume lets a stopped clock run again from where it stands, for a fixture that needs an
// exact gap between two writes (a double tap 30 s apart, not 30 s plus however long the first
// payment took on a loaded machine) but not a frozen clock for the rest of the test.
func (c *Clock) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		c.off, c.stopped = c.at.Add(c.off).Sub(time.Now()), false
	}
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}
