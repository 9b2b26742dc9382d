package admin_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// signIn signs in through the form, as an operator would.
func (c *chrome) signIn(email string) {
	c.t.Helper()
	c.open("/admin/login")
	c.step("fill the sign-in form",
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), password))
	c.follow(`.login button[type=submit]`)
}

// attr is the attribute name of the first element sel finds.
func (c *chrome) attr(sel, name string) string {
	c.t.Helper()
	v, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](
		`(document.querySelector(`+strconv.Quote(sel)+`) || {getAttribute: () => ""}).getAttribute(`+strconv.Quote(name)+`) || ""`))
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// An operator in Istanbul: every time on screen is in Europe/Istanbul, labelled, with UTC
// on hover; typing the time shown into the search finds the order. Before, the tables
// showed the browser's time without a zone and the search read UTC: nothing was found.
func TestTimeZoneInABrowser(t *testing.T) {
	browser := needChromium(t)
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	id := actOrder(t, e, "k-istanbul", 4500)
	var created time.Time
	if err := e.DB.Get(&created, `SELECT created_at FROM orders WHERE public_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	istanbul, err := time.LoadLocation("Europe/Istanbul")
	if err != nil {
		t.Fatal(err)
	}
	local := created.In(istanbul)
	c := newChrome(t, browser, e.URL)
	c.step("emulate Istanbul", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Istanbul"})
		return err
	}))
	c.signIn("ops@example.com")

	c.open("/admin/orders?customer=" + "cus_%3Cb%3E")
	want := local.Format("2006-01-02 15:04:05") + " Europe/Istanbul"
	for _, sel := range []string{"#results table.orders tbody time"} {
		if got := strings.Join(strings.Fields(c.text(sel)), " "); got != want {
			t.Fatalf("%s shows %q, want %q", sel, got, want)
		}
		if title := c.attr(sel, "title"); title != created.UTC().Format("2006-01-02 15:04:05")+" UTC" {
			t.Errorf("%s: title %q, want the UTC instant", sel, title)
		}
	}
	if label := c.text(`form.filters label:has(input[name=from])`); !strings.Contains(label, "Europe/Istanbul") {
		t.Errorf("the from field says %q", label)
	}

	// The minute on screen, typed into the search, finds the order.
	from, to := local.Truncate(time.Minute), local.Truncate(time.Minute).Add(time.Minute)
	c.step("search the minute shown",
		chromedp.Evaluate[chromedp.Void](`{
			const f = document.querySelector("form.filters");
			f.customer.value = "";
			f.from.value = `+strconv.Quote(from.Format("2006-01-02T15:04"))+`;
			f.to.value = `+strconv.Quote(to.Format("2006-01-02T15:04"))+`;
		}`),
		chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)),
		// The results of the search before are on the page already: wait for htmx to
		// have swapped this one's in (it pushes the search's URL after the swap).
		chromedp.Poll[chromedp.Void](`new URLSearchParams(location.search).get("from") === `+strconv.Quote(from.Format("2006-01-02T15:04"))),
		chromedp.WaitVisible(chromedp.CSS(`#results`)),
	)
	if n := c.count(`#results table.orders a[href="/admin/orders/` + id + `"]`); n != 1 {
		t.Fatalf("searching %s to the next minute in Istanbul found %d rows of order %s: %s", local.Format("15:04"), n, id, c.text("#results"))
	}

	// The key page: the same zone, the same label.
	c.open(keyPath(e, "k-istanbul"))
	if got := c.text("main"); !strings.Contains(got, want) || strings.Contains(got, " UTC") {
		t.Errorf("the key page does not show %q, or shows UTC: %s", want, got)
	}
	// Without the cookie (a first visit, cleared cookies) a page comes in UTC, and
	// console.js loads it again, once, in the browser's zone.
	c.step("forget the zone", chromedp.Evaluate[chromedp.Void](`document.cookie = "tekrar_tz=; path=/admin; max-age=0"`))
	c.open("/admin/orders?customer=" + "cus_%3Cb%3E")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(c.text("#results table.orders tbody time"), "Europe/Istanbul") {
		if time.Now().After(deadline) {
			t.Fatalf("without the cookie the page stays in %q", c.text("#results table.orders tbody time"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The proof is on the first screen of the key page, not below the fold.
	c.open(keyPath(e, "k-istanbul"))
	if top, err := chromedp.Run(c.ctx, chromedp.Evaluate[float64](`document.querySelector("#timeline tbody").getBoundingClientRect().top`)); err != nil || top > desktopHeight {
		t.Errorf("the key's timeline starts at %.0f px (%v), below the %d px screen", top, err, desktopHeight)
	}
	for _, p := range c.problems() {
		t.Errorf("console: %s", p)
	}
}

// On a phone a table's rows stack, and every cell still says which column it is.
func TestPhoneTablesKeepTheirLabels(t *testing.T) {
	browser := needChromium(t)
	e := apptest.New(t)
	newOperator(t, e, "ops@example.com", admin.RoleAdmin)
	actOrder(t, e, "k-phone", 4500)
	e.App.Service.FlushHistory()
	c := newChrome(t, browser, e.URL)
	c.signIn("ops@example.com")
	c.step("phone width", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: phoneWidth, Height: phoneHeight, DeviceScaleFactor: 3, Mobile: true})
		return err
	}))
	for _, page := range []string{"/admin/orders?customer=cus_%3Cb%3E", "/admin/keys", keyPath(e, "k-phone")} {
		c.open(page)
		unlabelled, err := chromedp.Run(c.ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("main table tbody td")).filter(td =>
			getComputedStyle(td, "::before").content.replace(/^"|"$/g, "") === "" ||
			getComputedStyle(td, "::before").content === "none").length`))
		if err != nil {
			t.Fatal(err)
		}
		cells := c.count("main table tbody td")
		if cells == 0 || unlabelled != 0 {
			t.Errorf("%s on a phone: %d of %d cells without their column's label", page, unlabelled, cells)
		}
	}
}
