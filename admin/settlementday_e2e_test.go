package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// "Yesterday's settlement looks wrong", as an operator in Istanbul answers it: from the
// console's home, Settlements (1 click), the day (2 clicks), and the page lists the day's
// movements under their totals, the capture at 23:59:59 of the day among them in the
// operator's zone. axe finds nothing on the list or the day's page, at desktop and phone
// size.
func TestSettlementComplaintInABrowser(t *testing.T) {
	browser := needChromium(t)
	s := newSettleDayEnv(t)
	c := newChrome(t, browser, s.e.URL)
	c.step("emulate Istanbul", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Istanbul"})
		return err
	}))
	c.signIn("viewer@example.com")
	c.open("/admin")
	c.open("/admin") // the home again, now with the zone cookie console.js set on the first load
	clicks := 0
	c.follow(`header.top nav a[href="/admin/settlements"]`)
	clicks++
	c.follow(`table.settlements a.settlement[href="` + s.path + `"]`)
	clicks++
	if c.location() != s.path {
		t.Fatalf("at %s after %d clicks, want %s", c.location(), clicks, s.path)
	}
	d := s.day.String()
	captured := strings.Join(strings.Fields(c.text("section#captured-try")), " ")
	for _, want := range []string{s.a, s.bo, d + " 23:59:59 Europe/Istanbul", d + " 00:00:00 Europe/Istanbul", "they agree"} {
		if !strings.Contains(captured, want) {
			t.Errorf("the captured total's movements lack %q: %s", want, captured)
		}
	}
	if late := c.text("#late ~ table"); !strings.Contains(late, s.a) || !strings.Contains(late, "settlement of "+s.day.AddDays(1).String()) {
		t.Errorf("what came late: %s", late)
	}
	t.Logf("from the console's home to the day's movements: %d clicks", clicks)

	for _, page := range []string{"/admin/settlements", s.path} {
		c.desktop()
		c.open(page)
		for _, v := range c.axe() {
			t.Errorf("axe, %s at %d px: %s", page, desktopWidth, v)
		}
		c.phone()
		c.open(page)
		for _, v := range c.axe() {
			t.Errorf("axe, %s at %d px: %s", page, phoneWidth, v)
		}
		c.shoot("settlement"+map[bool]string{true: "-day", false: "s"}[page == s.path]+"-phone", false)
	}
	for _, p := range c.problems() {
		t.Errorf("console: %s", p)
	}
}
