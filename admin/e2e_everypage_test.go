package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/reconcile"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/schedule"
)

// everyPage is a console with something on every page: the fill-ins for the routes'
// parameters, and the orders and keys whose pages show what the fill-ins' do not.
type everyPage struct {
	params  map[string]string // route parameter (":id" of an order, ":client", …) to its value
	ids     map[string]string // ":id" by the route's prefix, for the routes whose :id is not an order
	keyFor  map[string]string // ":key" by the route's suffix, when not params[":key"]
	shop    shop
	search  searchSeed
	plan    string // an order in installments, one of them charged twice
	expired string // a key past its expiry, not yet swept
}

// seedEveryPage fills e through the API and the tables the workers write, with the
// seeding the other tests do: the coffee shop's morning (key history, a replay, a conflict,
// a decline, a kiosk's expiring keys and a sweep), the missed webhook (outbox events, a
// failing delivery), the search's orders (a refund, an inbox event, a product and a
// register's oversold sale, one key of two clients), an installment plan charged twice, a
// dispute, a compensation, a dead letter, a receipt, a settled day, a reconciliation's
// refund of an orphan charge, a run of each scheduled task, a refund made in the console, a
// key that needs attention and an expired one.
func seedEveryPage(t *testing.T, e *apptest.Env, operator string) everyPage {
	t.Helper()
	ctx := context.Background()
	p := everyPage{shop: openShop(t, e)}
	m := newMissedWebhook(t, e)
	p.search = seedSearch(t, e)
	p.plan = planOrder(t, e, "k-every-plan", "cus_sofa", 300000, 3)
	if _, err := e.App.Scheduler.RunByHand(ctx, "installments", e.Clock.Now().AddDate(0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	chargeInstallmentAgain(t, e, p.plan, 2)

	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := e.DB.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The missed webhook's order is the hub: disputed and owed a compensation. The double
	// tap's second order has the customer's e-mail, and so a receipt.
	exec(`INSERT INTO order_disputes (order_id, provider, dispute_id, amount, reason, status, opened_at)
		SELECT id, 'psp', 'dp_every', 4500, 'fraudulent', 'open', now() - interval '2 days' FROM orders WHERE public_id = $1`, m.order)
	compensate(t, e, m.order, "watching", "charge answer lost", 30)
	event := recordReceipt(t, e, p.shop.tap2)
	body := []byte(`{"id":"evt_every_dead","type":"charge.succeeded","data":{"charge_id":"ch_dead","charge_key":"k_dead","sequence":1,"amount":100,"currency":"TRY","status":"succeeded"}}`)
	if err := e.App.Inbox.DeadLetter(ctx, "psp", "evt_every_dead", body,
		&inbox.UnstorableEventError{Reason: inbox.DeadRefusedByStore, Detail: "22003 out of range"}); err != nil {
		t.Fatal(err)
	}
	dead := actInt(t, e, `SELECT id FROM provider_dead_letters WHERE webhook_id = 'evt_every_dead'`)

	// A settled day with a capture and a refund: the search's order, moved into it.
	day := calendar.Of(time.Now(), time.UTC).AddDays(-3)
	start, _ := day.Window(time.UTC)
	exec(`UPDATE payments SET created_at = $2 WHERE order_id = (SELECT id FROM orders WHERE public_id = $1)`,
		p.search.order, start.Add(10*time.Hour))
	exec(`UPDATE refunds SET created_at = $2, updated_at = $2 WHERE order_id = (SELECT id FROM orders WHERE public_id = $1)`,
		p.search.order, start.Add(11*time.Hour))
	if _, err := settlement.New(e.DB, settlement.Config{Now: func() time.Time { return time.Now().Add(72 * time.Hour) }}, nil).
		Settle(ctx, e.ClientID, day); err != nil {
		t.Fatal(err)
	}

	// A key the provider could not answer for (what Release is for).
	actOrder(t, e, "k-every-attention", 2500)
	exec(`UPDATE idempotency_keys SET state = 'needs_attention', attention_reason = 'provider unreachable for 1h0m0s',
		response_status = NULL, response_body = NULL, response_headers = NULL WHERE client_id = $1 AND key = 'k-every-attention'`, e.ClientID)

	// A charge of no order, refunded by reconciliation (its run, its finding, its audit
	// entry), as TestReconciliationPageShowsOrphanCharges makes one; a run of every other
	// scheduled task, for the Schedule page; and a refund an admin made in the console.
	sb := psp.NewSandbox(e.DB, psp.SandboxOptions{})
	if _, err := sb.Charge(ctx, psp.ChargeRequest{Key: "stray-every", Amount: 1234, Currency: "TRY", CardToken: psp.TokenVisa,
		Description: "lost order"}); err != nil {
		t.Fatal(err)
	}
	rc := reconcile.New(e.DB, sb, e.App.Service, app.ReconcileConfig(e.Config, e.Clock.Now, nil, false), slog.New(slog.DiscardHandler))
	if res, err := rc.Run(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil || res.RefundsMade != 1 {
		t.Fatalf("reconcile: %+v %v", res, err)
	}
	for _, task := range []string{"sweep", "settle", "reconcile"} {
		if _, err := e.App.Scheduler.RunNow(ctx, task); err != nil && !errors.Is(err, schedule.ErrNoTask) {
			t.Fatalf("run %s: %v", task, err)
		}
	}
	refunder := actSignIn(t, e, "refunds@example.com", admin.RoleAdmin)
	refund := "/admin/orders/" + p.shop.tap2 + "/refund"
	if r := refunder.do("POST", refund, actForm(t, refunder.do("GET", refund, nil), refund, "reason", "double tap")); r.status != http.StatusSeeOther {
		t.Fatalf("refund in the console: %d %s", r.status, r.body)
	}

	// A key past its expiry, which the sweep above did not see.
	p.expired = "k-every-expired"
	actOrder(t, e, p.expired, 1500)
	exec(`UPDATE idempotency_keys SET expires_at = $2 WHERE client_id = $1 AND key = $3`, e.ClientID, e.Clock.Now().Add(-time.Minute), p.expired)

	var opID string
	if err := e.DB.Get(&opID, `SELECT id::text FROM operators WHERE email = $1`, operator); err != nil {
		t.Fatal(err)
	}
	e.App.Service.FlushHistory()

	p.params = map[string]string{
		":id":       m.order,
		":client":   strconv.FormatInt(e.ClientID, 10),
		":key":      url.PathEscape(p.shop.tapKeys[0]),
		":sku":      "SRCH",
		":day":      day.String(),
		":event":    event,
		":delivery": strconv.FormatInt(m.failingID, 10),
	}
	p.ids = map[string]string{
		"/admin/webhooks/":   m.failing,
		"/admin/inbox/dead/": strconv.FormatInt(dead, 10),
		"/admin/operators/":  opID,
	}
	p.keyFor = map[string]string{"/release": "k-every-attention"}
	return p
}

// fill puts the seed's values into a route's parameters; ok is false when a parameter has
// no value (a route added with a parameter the seed does not know yet).
func (p everyPage) fill(route string) (path string, ok bool) {
	parts := strings.Split(route, "/")
	for i, part := range parts {
		if !strings.HasPrefix(part, ":") {
			continue
		}
		v, known := p.params[part]
		if part == ":id" {
			for prefix, id := range p.ids {
				if strings.HasPrefix(route, prefix) {
					v = id
				}
			}
		}
		if part == ":key" {
			for suffix, key := range p.keyFor {
				if strings.HasSuffix(route, suffix) {
					v = url.PathEscape(key)
				}
			}
		}
		if !known {
			return route, false
		}
		parts[i] = v
	}
	return strings.Join(parts, "/"), !strings.Contains(route, "*")
}

// TestEveryConsolePageHasNoAxeViolations walks every GET page the console registers (the
// gin engine's routes, not a list kept by hand, so that a page added later is walked
// without editing this test), signed in as an admin so that the action forms are walked
// too, on a console seeded so that each page shows its real content; and the search with
// several results and with none, the sign-in page signed out, a 404 and the pages of the
// seed's other orders and keys. At 1280 and at 390 px wide, axe finds nothing on any of
// them, and at 390 px none scrolls sideways. Every failure is reported, not the first.
func TestEveryConsolePageHasNoAxeViolations(t *testing.T) {
	browser := needChromium(t)
	started := time.Now()
	e := apptest.New(t, func(c *config.Server) {
		c.SecretsKey = deliveries.NewSecretsKey()
		c.WebhooksAllowLoopback = true
	})
	const email = "ops@example.com"
	newOperator(t, e, email, admin.RoleAdmin)
	seed := seedEveryPage(t, e, email)
	t.Logf("seeded in %s", time.Since(started).Round(time.Millisecond))

	type visit struct {
		path   string
		status int64
	}
	var pages []visit
	for _, r := range e.App.Routes() {
		switch {
		case r.Method != http.MethodGet || (r.Path != "/admin" && !strings.HasPrefix(r.Path, "/admin/")):
			continue
		case strings.HasSuffix(r.Path, ".csv"):
			continue // a download, no page
		case r.Path == "/admin/receipts/:event/html":
			// The e-mail's HTML as the customer's mail client gets it, not a console page: it
			// is served under a sandboxing policy that runs no script (axe cannot run in it),
			// and its markup is shown, as text, on the receipt's page, which is walked.
			continue
		case r.Path == "/admin/login":
			continue // signed in it sends home: walked signed out below
		}
		path, ok := seed.fill(r.Path)
		if !ok {
			t.Errorf("GET %s: the walk has no value for its parameters; add one to seedEveryPage", r.Path)
			continue
		}
		if r.Path == "/admin/orders/pair" {
			path += "?first=" + seed.shop.tap1 + "&second=" + seed.shop.tap2
		}
		pages = append(pages, visit{path, http.StatusOK})
	}
	if len(pages) < 30 {
		t.Fatalf("only %d console pages: the walk is not seeing the console", len(pages))
	}
	pages = append(pages,
		visit{"/admin/search?q=shared-key", http.StatusOK},                          // one key of two clients: a list
		visit{"/admin/search?q=" + url.QueryEscape("no such thing"), http.StatusOK}, // nothing matches
		visit{"/admin/orders?email=" + url.QueryEscape(seed.shop.customerEmail) + "&amount=" + seed.shop.customerAmount, http.StatusOK},
		visit{"/admin/orders/" + seed.plan, http.StatusOK},
		visit{"/admin/orders/" + seed.search.order, http.StatusOK}, // refunded, in a settled day
		visit{"/admin/orders/" + seed.search.sale, http.StatusOK},  // a register's oversold sale
		visit{"/admin/orders/" + seed.shop.tap2, http.StatusOK},
		visit{keyPath(e, seed.shop.retryKey), http.StatusOK}, // replayed, then reused: a conflict
		visit{keyPath(e, seed.expired), http.StatusOK},
		visit{"/admin/inbox?view=dead", http.StatusOK},
		visit{"/admin/no-such-page", http.StatusNotFound},
	)

	c := newChrome(t, browser, e.URL)
	check := func(v visit, size string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(c.ctx, 15*time.Second)
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(c.base+v.path))
		cancel()
		switch {
		case err != nil:
			t.Errorf("GET %s (%s): %v", v.path, size, err)
			return
		case resp == nil || resp.Status != v.status:
			t.Errorf("GET %s (%s): %v, want %d", v.path, size, resp, v.status)
			return
		}
		if vs := c.axe(); len(vs) != 0 {
			t.Errorf("axe on %s at %s size: %d violations:\n\t%s", v.path, size, len(vs), strings.Join(vs, "\n\t"))
		}
		if size == "phone" {
			wide, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
			if err != nil {
				t.Fatal(err)
			}
			if wide {
				t.Errorf("%s scrolls sideways on a %d px phone", v.path, phoneWidth)
			}
		}
	}
	sizes := []struct {
		name string
		set  func()
	}{{"desktop", c.desktop}, {"phone", c.phone}}

	// Signed out: the sign-in page.
	for _, s := range sizes {
		s.set()
		check(visit{"/admin/login", http.StatusOK}, s.name)
	}
	c.desktop()
	c.signIn(email)
	walked := time.Now()
	for _, s := range sizes {
		s.set()
		for _, v := range pages {
			check(v, s.name)
		}
	}
	t.Logf("%d pages at 2 sizes in %s (%s in all)", len(pages)+1, time.Since(walked).Round(time.Millisecond),
		time.Since(started).Round(time.Millisecond))
	for _, p := range c.problems() {
		if strings.Contains(p, "status of 404") && strings.Contains(p, "/admin/no-such-page") {
			continue // the browser's own line for the 404 asked for
		}
		t.Errorf("console: %s", p)
	}
}
