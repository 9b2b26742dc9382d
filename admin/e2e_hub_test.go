package admin_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// The complaint "a merchant never got order.paid for order X", walked from the console's
// home as an operator with the order's id: Events, the order's events, the event's
// deliveries on the order page; three clicks. The answer on screen is the database's:
// which endpoint answered 500 and when tekrar tries again, which took it. The pages of the
// walk and the endpoint's have no axe violation at desktop and phone size.
func TestMissedWebhookComplaintInABrowser(t *testing.T) {
	browser := needChromium(t)
	e := apptest.New(t, func(c *config.Server) {
		c.SecretsKey = deliveries.NewSecretsKey()
		c.WebhooksAllowLoopback = true
	})
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	m := newMissedWebhook(t, e)
	var held struct {
		Attempts int `db:"attempts"`
		Status   int `db:"last_status"`
	}
	if err := e.DB.Get(&held, `SELECT attempts, last_status FROM webhook_deliveries WHERE id = $1`, m.failingID); err != nil {
		t.Fatal(err)
	}
	c := newChrome(t, browser, e.URL)
	c.signIn("ops@example.com")

	c.open("/admin")
	clicks := 0
	click := func(sel string) { c.t.Helper(); c.follow(sel); clicks++ }
	click(`.top nav a[href="/admin/events"]`)
	c.step("type the order's id", chromedp.SendKeys(chromedp.CSS(`form.filters input[name=order]`), m.order))
	click(`form.filters button[type=submit]`)
	if got := strings.Join(strings.Fields(c.text(`table.outbox tbody tr:has(a[href$="#`+m.event+`"]) .state`)), " "); got != "dispatched · 1 of 2 delivered, 1 retrying" {
		t.Errorf("the Events page says %q of the order.paid", got)
	}
	click(`table.outbox a[href="/admin/orders/` + m.order + `#` + m.event + `"]`)
	if loc := c.location(); loc != "/admin/orders/"+m.order+"#"+m.event {
		t.Fatalf("the walk ended on %s", loc)
	}
	t.Logf("from the console's home to the event's deliveries: %d clicks", clicks)
	if clicks > 3 {
		t.Errorf("%d clicks, want at most 3", clicks)
	}
	row := `section.event-block[id="` + m.event + `"] tr:has(a[href="/admin/webhooks/` + m.failing + `"])`
	cells := strings.Join(strings.Fields(c.text(row)), " ")
	for _, want := range []string{"retrying", " " + strconv.Itoa(held.Attempts) + " ", "HTTP " + strconv.Itoa(held.Status), "<b>boom</b> database is down", "Redeliver…"} {
		if !strings.Contains(cells, want) {
			t.Errorf("the failing endpoint's row %q does not say %q", cells, want)
		}
	}
	if ok := strings.Join(strings.Fields(c.text(`section.event-block[id="`+m.event+`"] tr:has(a[href="/admin/webhooks/`+m.working+`"])`)), " "); !strings.Contains(ok, "delivered") || !strings.Contains(ok, "HTTP 200") {
		t.Errorf("the working endpoint's row says %q", ok)
	}
	c.shoot("order-events", false)

	pages := []string{"/admin/orders/" + m.order, "/admin/events?order=" + m.order, "/admin/webhooks/" + m.failing}
	for _, size := range []string{"desktop", "phone"} {
		if size == "phone" {
			c.phone()
		}
		for _, p := range pages {
			c.open(p)
			for _, v := range c.axe() {
				t.Errorf("axe, %s at %s size: %s", p, size, v)
			}
		}
	}
	c.shoot("order-events-phone", false)
	for _, p := range c.problems() {
		t.Errorf("console: %s", p)
	}
}
