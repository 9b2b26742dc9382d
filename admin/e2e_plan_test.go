package admin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// "Was my installment charged twice?", in Chromium, for a client in Istanbul: from the
// console's home to the plan's answer in 3 clicks (Orders, Search with the customer's id,
// the order), and the answer says what the ledger holds. On a 390 px phone the order page
// does not scroll sideways; axe finds nothing on the order, Schedule, Operators and a webhook
// endpoint's pages at desktop and phone size.
func TestInstallmentVerdictInABrowser(t *testing.T) {
	browser := needChromium(t)
	e := apptest.New(t, func(c *config.Server) { c.SecretsKey = deliveries.NewSecretsKey() })
	e.DB.MustExec(`UPDATE clients SET time_zone = 'Europe/Istanbul' WHERE id = $1`, e.ClientID)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	order := planOrder(t, e, "k-sofa-browser", "cus_sofa", 300000, 3)
	if _, err := e.App.Scheduler.RunByHand(context.Background(), "installments", e.Clock.Now().AddDate(0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	chargeInstallmentAgain(t, e, order, 2)
	e.App.Service.FlushHistory()

	// A webhook endpoint with a delivery, for its page.
	created := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"https://hooks.shop.example/tekrar","event_types":["order.paid"]}`),
		"Content-Type", "application/json")
	var ep struct{ ID string }
	if err := json.Unmarshal(created.Body, &ep); err != nil || created.Status != 201 {
		t.Fatalf("create an endpoint: %d %s", created.Status, created.Body)
	}
	tx, err := e.DB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := outbox.Event{ID: "evt_00112233445566778899aabbccddeeff", Type: outbox.OrderPaid, ClientID: e.ClientID,
		CreatedAt: time.Now(), Payload: []byte(`{"order":"` + order + `"}`)}
	if _, err := deliveries.CreateDeliveries(context.Background(), tx, ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	c := newChrome(t, browser, e.URL)
	c.signIn("ops@example.com")
	c.open("/admin")
	clicks := 0
	c.follow(`header nav a[href="/admin/orders"]`)
	clicks++
	c.step("search the customer's orders",
		chromedp.SendKeys(chromedp.CSS(`form.filters input[name=customer]`), "cus_sofa"),
		chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)),
		// The list showed the order before the search too: wait for htmx to have swapped
		// the results in (it pushes the search's URL after the swap), or the click below
		// can land on a row being replaced.
		chromedp.Poll[chromedp.Void](`location.search.includes("customer=cus_sofa")`),
		chromedp.WaitVisible(chromedp.CSS(`#results a[href="/admin/orders/`+order+`"]`)))
	clicks++
	c.follow(`#results a[href="/admin/orders/` + order + `"]`)
	clicks++
	const want = "Installment 2 was charged twice: 2 charges for installment 2, a refund is owed."
	if got := c.text("#plan-verdict .headline"); got != want {
		t.Fatalf("the plan's answer is %q, want %q", got, want)
	}
	if n := c.count("table.installments tbody tr"); n != 3 {
		t.Errorf("the plan shows %d installments, want 3", n)
	}
	t.Logf("from the console's home to the installment's answer: %d clicks", clicks)
	if clicks > 3 {
		t.Errorf("%d clicks to the answer, want at most 3", clicks)
	}
	c.shoot("installments", true)

	pages := []string{"/admin/orders/" + order, "/admin/schedule", "/admin/operators", "/admin/webhooks/" + ep.ID}
	for _, size := range []string{"desktop", "phone"} {
		if size == "phone" {
			c.phone()
		} else {
			c.desktop()
		}
		for _, page := range pages {
			c.open(page)
			if v := c.axe(); len(v) != 0 {
				t.Errorf("axe on %s (%s): %d violations:\n%s", page, size, len(v), strings.Join(v, "\n"))
			}
			if size == "phone" && page == pages[0] {
				wide, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
				if err != nil {
					t.Fatal(err)
				}
				if wide {
					t.Error("the order page scrolls sideways on a 390 px phone")
				}
				c.shoot("installments-phone", false)
			}
		}
	}
	c.desktop()
	if p := c.problems(); len(p) != 0 {
		t.Errorf("the browser reported: %s", strings.Join(p, "; "))
	}
}
