package admin_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
)

var (
	// A link to an order or a pair of orders, by public ids only.
	orderLinkShape = regexp.MustCompile(`^/admin/orders(\?.*|/ord_[0-9a-f]{32}(/refund)?(\?done=[a-z-]+)?|/pair\?first=ord_[0-9a-f]{32}&second=ord_[0-9a-f]{32})?$`)
	// An order or refund named by a bare integer, in the page's text.
	integerOrderText = regexp.MustCompile(`(?i)\b(order|refund)s? \(?\d+([^\d.,]|$)`) // an amount ("refund 45.00 TRY") is not an id
)

// TestConsoleNamesOrdersByPublicID: order and refund ids come from sequences shared by all
// clients, so the console, like the API, shows and links them only by their public ids.
// Every console page an operator can open for the orders of a complaint (a double tap, a
// refunded order), found by walking the registered GET routes, links orders as
// /admin/orders/ord_... and names no order or refund by an integer; the pages are reached by
// public id, and an internal id is 404.
func TestConsoleNamesOrdersByPublicID(t *testing.T) {
	c := newComplaint(t)
	newOperator(t, c.e, "admin@example.com", admin.RoleAdmin)
	b := newBrowser(t, c.e)
	if p := b.login("admin@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("login: %d", p.status)
	}
	refund := c.e.Do(t, "POST", "/v1/orders/"+c.tap2+"/refunds", c.e.Secret, []byte(`{"amount":100}`), "Idempotency-Key", "tap-2-refund")
	if refund.Status != http.StatusCreated {
		t.Fatalf("refund: %d %s", refund.Status, refund.Body)
	}
	c.e.App.Service.FlushHistory()

	var internal int64
	if err := c.e.DB.Get(&internal, `SELECT id FROM orders WHERE public_id = $1`, c.tap2); err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprint(c.e.ClientID)
	pages := []string{
		"/admin", "/admin/orders?customer=cus_dt", "/admin/orders/" + c.tap2, "/admin/orders/" + c.tap2 + "/refund",
		"/admin/orders/pair?first=" + c.tap1 + "&second=" + c.tap2,
		"/admin/keys", "/admin/keys?order=" + c.tap2, "/admin/keys/" + client + "/tap-2", "/admin/keys/" + client + "/tap-2-refund",
		"/admin/keys/" + client + "/rp-1", "/admin/replays", "/admin/replays?order=" + c.replay, "/admin/conflicts",
		"/admin/expirations", "/admin/audit",
	}
	links := 0
	for _, path := range pages {
		p := b.do("GET", path, nil)
		if p.status != http.StatusOK {
			t.Errorf("GET %s: %d", path, p.status)
			continue
		}
		p.doc.Find("a[href]").Each(func(_ int, a *goquery.Selection) {
			href, _ := a.Attr("href")
			if u, err := url.Parse(href); err == nil && strings.HasPrefix(u.Path, "/admin/orders/") {
				links++
				if !orderLinkShape.MatchString(href) {
					t.Errorf("%s links an order as %q", path, href)
				}
			}
		})
		if m := integerOrderText.FindString(p.doc.Find("main").Text()); m != "" {
			t.Errorf("%s names an order or refund by an integer: %q", path, m)
		}
		if strings.Contains(p.body, "/admin/orders/"+fmt.Sprint(internal)) {
			t.Errorf("%s links the internal id", path)
		}
	}
	if links < 10 {
		t.Fatalf("only %d order links seen: the walk is not seeing the pages", links)
	}
	for _, path := range []string{"/admin/orders/" + fmt.Sprint(internal), "/admin/orders/" + fmt.Sprint(internal) + "/refund"} {
		if p := b.do("GET", path, nil); p.status != http.StatusNotFound {
			t.Errorf("GET %s (an internal id): %d, want 404", path, p.status)
		}
	}
	if p := b.do("GET", "/admin/keys?order="+fmt.Sprint(internal), nil); p.status != http.StatusBadRequest {
		t.Errorf("keys filtered by an internal order id: %d, want 400", p.status)
	}
}
