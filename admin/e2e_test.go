package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// shop is a morning of a small coffee chain, sent through the API: the complaint the
// operator works on (a double tap) and what surrounds it.
type shop struct {
	tapKeys        [2]string
	tap1, tap2     string // the double tap: one latte, two keys, 30 s apart
	retryKey       string
	retry          string // a phone that timed out and retried: one key, sent twice
	kioskKeys      []string
	customerEmail  string
	customerAmount string // as on the customer's receipt
}

func openShop(t *testing.T, e *apptest.Env) shop {
	t.Helper()
	s := shop{
		tapKeys:        [2]string{"3f9c1e2a-7b4d-4c55-9e0f-5a1d2c3b4e01", "b81d6f40-2c9e-4a7b-8d13-9f0e1a2b3c02"},
		retryKey:       "c7e2a913-5d08-4f6a-b1c4-2e3d4f5a6b03",
		kioskKeys:      []string{"kiosk-0042-0001", "kiosk-0042-0002"},
		customerEmail:  "ayse.yilmaz@example.com",
		customerAmount: "49.90",
	}
	iphone, android := "TekrarShop/2.4 (iPhone; iOS 18.2)", "TekrarShop/2.4 (Android 15)"
	// The morning before the complaint: a sale every 40 minutes, every fourth one sent
	// twice by a phone whose first answer got lost.
	menu := []struct {
		item   string
		amount int64
	}{{"Simit", 1500}, {"Mocha", 5500}, {"Çay", 1000}, {"Latte", 4500}}
	regulars := []string{"elif", "can", "deniz"}
	for i := range 12 {
		m, who := menu[i%len(menu)], regulars[i%len(regulars)]
		p := payment{key: fmt.Sprintf("%08x-1e2f-4a3b-9c4d-%012x", 0x5a6b7c00+i, 0xe5f6a7b8c9d0+i),
			customer: "cus_" + who, email: who + "@example.com", item: m.item, amount: m.amount, agent: android}
		if i%2 == 1 {
			p.agent, p.card = iphone, "tok_mastercard"
		}
		pay(t, e, p)
		if i%4 == 3 {
			e.Clock.Advance(3 * time.Second)
			pay(t, e, p)
		}
		e.Clock.Advance(40 * time.Minute)
	}

	tap := payment{customer: "cus_ayse", email: s.customerEmail, item: "Latte", amount: 4990, agent: iphone}
	e.Clock.Stop() // the pair is exactly 30 s apart however long a payment takes
	tap.key = s.tapKeys[0]
	s.tap1 = pay(t, e, tap)
	e.Clock.Advance(30 * time.Second)
	tap.key = s.tapKeys[1]
	s.tap2 = pay(t, e, tap)
	e.Clock.Resume()

	e.Clock.Advance(2 * time.Minute)
	retry := payment{key: s.retryKey, customer: "cus_mehmet", email: "mehmet@example.com", item: "Çay", amount: 1000,
		agent: android}
	s.retry = pay(t, e, retry)
	e.Clock.Advance(4 * time.Second)
	if again := pay(t, e, retry); again != s.retry {
		t.Fatalf("the retry made order %s, want the first one, %s", again, s.retry)
	}
	// The same key sent later for another purchase: refused as a conflict.
	if r := evSend(t, e, evRequest{key: s.retryKey, customer: "cus_mehmet", amount: 2000, agent: android}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("key reused for another purchase: %d %s", r.Status, r.Body)
	}
	if r := evSend(t, e, evRequest{key: "e4f5a6b7-8c9d-4e0f-a1b2-c3d4e5f6a712", customer: "cus_zeynep", amount: 4500,
		card: "tok_declined", agent: iphone}); r.Status == http.StatusCreated {
		t.Fatalf("a declined card was accepted: %s", r.Body)
	}

	// A kiosk whose keys live 30 minutes: they show as expiring within the hour.
	kiosk, kioskID := e.NewClient(t, "lobby kiosk")
	if _, err := e.DB.Exec(`UPDATE clients SET key_ttl = interval '30 minutes' WHERE id = $1`, kioskID); err != nil {
		t.Fatal(err)
	}
	for i, k := range s.kioskKeys {
		if r := evSend(t, e, evRequest{secret: kiosk, key: k, customer: "cus_walkin", amount: int64(1000 + 500*i),
			agent: "tekrar-kiosk/1.3"}); r.Status != http.StatusCreated {
			t.Fatalf("kiosk order: %d %s", r.Status, r.Body)
		}
	}
	if _, err := e.App.Sweeper.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.App.Service.FlushHistory()
	return s
}

// TestConsoleInABrowser is an operator's complaint, worked end to end in a real browser:
// sign in with the keyboard, look around, find the double tap the customer called about,
// compare the two orders, refund one and find the refund in the audit log. Every main page
// is photographed on the way (see docs/console.md), and no page may log an error or a
// Content-Security-Policy violation.
func TestConsoleInABrowser(t *testing.T) {
	browser := needChromium(t)
	e := apptest.New(t)
	const email = "ops@example.com"
	newOperator(t, e, email, admin.RoleAdmin)
	s := openShop(t, e)
	c := newChrome(t, browser, e.URL)

	// Signed out, the console sends to the sign-in page, which works from the keyboard.
	c.open("/admin")
	if loc := c.location(); loc != "/admin/login?next=%2Fadmin" {
		t.Fatalf("signed out, /admin went to %s", loc)
	}
	c.shoot("login", true)
	c.step("type the email", chromedp.Focus(chromedp.ID("email")), chromedp.KeyEvent(email), chromedp.KeyEvent(kb.Tab))
	if focused, _ := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.activeElement.id`)); focused != "password" {
		t.Fatalf("Tab from the email field went to %q, want the password field", focused)
	}
	c.step("type the password", chromedp.KeyEvent(password))
	if status := c.navigate("press Enter", chromedp.KeyEvent(kb.Enter)); status != 200 {
		t.Fatalf("signing in answered %d", status)
	}
	if loc := c.location(); loc != "/admin" {
		t.Fatalf("signed in at %s, want /admin", loc)
	}
	if who := c.text("header .who span"); !strings.Contains(who, email) || !strings.Contains(who, "admin") {
		t.Fatalf("header shows %q", who)
	}

	// The overview and the key, replay, conflict and expiration pages.
	if stats := c.text(".stats"); !strings.Contains(stats, "replays") {
		t.Fatalf("overview stats: %q", stats)
	}
	c.shoot("overview", true)
	c.follow(`header nav a[href="/admin/keys"]`)
	if n := c.count("#rows tbody tr"); n < 7 {
		t.Fatalf("key list: %d rows", n)
	}
	c.shoot("keys", true)
	c.follow(`#rows a[href="` + keyPath(e, s.tapKeys[0]) + `"]`)
	if h := c.text("h1"); !strings.Contains(h, s.tapKeys[0]) {
		t.Fatalf("key page heading %q", h)
	}
	c.shoot("key", true)
	c.follow(`header nav a[href="/admin/replays"]`)
	if rows := c.text("#rows"); !strings.Contains(rows, s.retryKey) {
		t.Fatalf("the replayed key is not listed: %q", rows)
	}
	c.shoot("replays", true)
	c.follow(`header nav a[href="/admin/conflicts"]`)
	if rows := c.text("#rows"); !strings.Contains(rows, s.retryKey) {
		t.Fatalf("the reused key is not listed: %q", rows)
	}
	c.shoot("conflicts", true)
	c.follow(`header nav a[href="/admin/expirations"]`)
	if n := c.count("#expiring tbody tr"); n != len(s.kioskKeys) {
		t.Fatalf("%d keys expiring within the hour, want %d", n, len(s.kioskKeys))
	}
	if n := c.count("#sweeps tbody tr"); n != 1 {
		t.Fatalf("%d sweeps shown, want 1", n)
	}
	c.shoot("expirations", true)

	// The complaint: "I paid 49.90 once and was charged twice". The search is swapped in
	// by htmx, without leaving the page, and the URL follows it.
	c.follow(`header nav a[href="/admin/orders"]`)
	c.step("search the customer's orders",
		chromedp.Evaluate[chromedp.Void](`window.e2eSamePage = true`),
		chromedp.SendKeys(chromedp.CSS(`form.filters input[name=email]`), s.customerEmail),
		chromedp.SendKeys(chromedp.CSS(`form.filters input[name=amount]`), s.customerAmount),
		chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)),
		// Wait for htmx to have swapped the results in: it pushes the search's URL after.
		chromedp.Poll[chromedp.Void](`location.search.includes("amount=")`),
		chromedp.WaitVisible(chromedp.CSS(`#results article.pair`)),
	)
	if same, _ := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`window.e2eSamePage === true`)); !same {
		t.Error("the search reloaded the page instead of swapping the results in (htmx)")
	}
	if loc := c.location(); !strings.Contains(loc, "email=ayse.yilmaz%40example.com") || !strings.Contains(loc, "amount=49.90") {
		t.Errorf("the URL does not follow the search: %s", loc)
	}
	if n := c.count("#results table.orders tbody tr"); n != 2 {
		t.Fatalf("the search found %d orders, want the 2 of the double tap", n)
	}
	if n := c.count("#results article.pair"); n != 1 {
		t.Fatalf("%d suspected double taps, want 1", n)
	}
	if head := c.text("#results article.pair .pair-head"); !strings.Contains(head, "30 s apart") {
		t.Fatalf("pair heading %q", head)
	}
	c.shoot("orders", true)
	c.phone()
	c.shoot("orders-phone", false)
	if wide, _ := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		t.Error("the order search scrolls sideways on a phone")
	}
	c.desktop()

	// The two orders side by side, then the second one, refunded.
	c.follow(`#results article.pair a[href^="/admin/orders/pair?"]`)
	if verdict := c.text(".verdict .headline"); !strings.Contains(verdict, "charged twice") {
		t.Fatalf("pair verdict %q", verdict)
	}
	c.shoot("pair", true)
	second := "/admin/orders/" + s.tap2
	c.follow(`.pair-cols h2 a[href="` + second + `"]`)
	c.shoot("order", true)
	c.follow(`#order-actions a[href="` + second + `/refund"]`)
	amount, err := chromedp.Run(c.ctx, chromedp.Value(chromedp.CSS(`input[name=amount]`)))
	if err != nil || amount != s.customerAmount {
		t.Fatalf("refund amount %q (%v), want the full %s", amount, err, s.customerAmount)
	}
	c.step("give a reason", chromedp.SendKeys(chromedp.CSS(`input[name=reason]`), "double tap: one latte charged twice"))
	c.shoot("refund", true)
	c.follow(`form.confirm-form button[type=submit]`)
	if loc := c.location(); loc != second+"?done=refunded" {
		t.Fatalf("after the refund: %s", loc)
	}
	if msg := c.text("#order-actions .flash"); msg != "Refund made." {
		t.Fatalf("flash %q", msg)
	}
	if n := c.count("table.refunds tbody tr"); n != 1 {
		t.Fatalf("%d refunds shown, want 1", n)
	}
	if row := c.text("table.refunds tbody tr"); !strings.Contains(row, "49.90") || !strings.Contains(row, "succeeded") ||
		!strings.Contains(row, "double tap") {
		t.Fatalf("refund row %q", row)
	}
	c.shoot("order-refunded", true)
	if n := actInt(t, e, `SELECT count(*) FROM refunds r JOIN orders o ON o.id = r.order_id WHERE o.public_id = $1`, s.tap2); n != 1 {
		t.Fatalf("%d refund rows for order %s, want 1", n, s.tap2)
	}
	if got, want := ledgerOf(t, e, s.tap2), (ledger{refunds: 1, refunded: 4990, providerRefunds: 1, providerRefunded: 4990, audit: 1}); got != want {
		t.Fatalf("books after the refund %+v, want %+v", got, want)
	}
	if n := actInt(t, e, `SELECT count(*) FROM refunds r JOIN orders o ON o.id = r.order_id WHERE o.public_id = $1`, s.tap1); n != 0 {
		t.Fatalf("the first order has %d refunds", n)
	}

	// The audit log says who did it.
	c.follow(`header nav a[href="/admin/audit"]`)
	if n := c.count("table.audit tbody tr"); n != 1 {
		t.Fatalf("%d audit entries, want 1", n)
	}
	row := c.text("table.audit tbody tr")
	for _, want := range []string{email, admin.ActionRefund, "order " + s.tap2, "double tap"} {
		if !strings.Contains(row, want) {
			t.Errorf("audit entry %q does not say %q", row, want)
		}
	}
	c.shoot("audit", true)

	seen := c.problems()
	for _, p := range seen {
		t.Errorf("console: %s", p)
	}
	// The watch on the console works: an inline script is refused, and seen.
	c.step("break the CSP on purpose", chromedp.Evaluate[chromedp.Void](
		`{ const s = document.createElement("script"); s.textContent = "1"; document.body.append(s) }`))
	for deadline := time.Now().Add(5 * time.Second); len(c.problems()) == len(seen); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an inline script went unnoticed: the console watch would miss a CSP violation")
		}
	}
}
