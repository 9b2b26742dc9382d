package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// payment is an order as an app sends it.
type payment struct {
	key, customer, email, card, item, currency, agent string
	amount                                            int64
	metadata                                          map[string]string
}

// pay sends a payment through the API and returns the order's id; a repeat of a key gets
// the first order back.
func pay(t *testing.T, e *apptest.Env, p payment) string {
	t.Helper()
	in := checkout.OrderInput{Currency: p.currency, Amount: p.amount, Metadata: p.metadata,
		Items:    []checkout.Item{{SKU: strings.ToUpper(p.item), Name: p.item, Quantity: 1, UnitAmount: p.amount}},
		Payment:  checkout.PaymentInput{CardToken: p.card},
		Customer: &checkout.Customer{ID: p.customer, Email: p.email}}
	if in.Currency == "" {
		in.Currency = "TRY"
	}
	if in.Payment.CardToken == "" {
		in.Payment.CardToken = "tok_visa"
	}
	if p.agent == "" {
		p.agent = "TekrarShop/2.1 (iPhone)"
	}
	body, _ := json.Marshal(in)
	r := e.Do(t, "POST", "/v1/orders", e.Secret, body, "Idempotency-Key", p.key, "User-Agent", p.agent)
	if r.Status != http.StatusCreated {
		t.Fatalf("order %s: %d %s", p.key, r.Status, r.Body)
	}
	var v struct{ ID string }
	if err := json.Unmarshal(r.Body, &v); err != nil || !checkout.ValidOrderID(v.ID) {
		t.Fatalf("order %s: %s", p.key, r.Body)
	}
	return v.ID
}

// complaint is a console's worth of orders: a double tap (two keys, 30 s apart), a replay
// (one key sent twice), an order in euros and one whose customer fields hold markup.
type complaint struct {
	e                             *apptest.Env
	b                             *browser
	tap1, tap2, replay, euro, xss string
}

const (
	xssCustomer = `<script>alert(1)</script>`
	xssMeta     = `<script>alert(2)</script>`
	xssEmail    = `<script>alert(3)</script>@x.io`
)

func newComplaint(t *testing.T, change ...func(*config.Server)) *complaint {
	t.Helper()
	e := apptest.New(t, change...)
	newOperator(t, e, "ops@example.com", admin.RoleViewer)
	c := &complaint{e: e, b: newBrowser(t, e)}
	tap := payment{customer: "cus_dt", email: "Deniz@Example.com", item: "Latte", amount: 4990}
	e.Clock.Stop() // the pair is exactly 30 s apart however long a payment takes
	tap.key = "tap-1"
	c.tap1 = pay(t, e, tap)
	e.Clock.Advance(30 * time.Second)
	tap.key = "tap-2"
	c.tap2 = pay(t, e, tap)
	e.Clock.Resume()
	e.Clock.Advance(10 * time.Minute)
	rp := payment{key: "rp-1", customer: "cus_rp", email: "rp@example.com", card: "tok_mastercard", item: "Latte", amount: 4990}
	c.replay = pay(t, e, rp)
	e.Clock.Advance(5 * time.Second)
	if again := pay(t, e, rp); again != c.replay {
		t.Fatalf("the replay made order %s, want %s", again, c.replay)
	}
	e.Clock.Advance(10 * time.Minute)
	c.euro = pay(t, e, payment{key: "eu-1", customer: "cus_eu", item: "Tea", amount: 1250, currency: "EUR"})
	c.xss = pay(t, e, payment{key: "xss-1", customer: xssCustomer, item: "Cake", amount: 700, metadata: map[string]string{"note": xssMeta}})
	// The API refuses such an email; a row written by an older version might hold anything.
	if _, err := e.DB.Exec(`UPDATE orders SET customer_email = $1 WHERE public_id = $2`, xssEmail, c.xss); err != nil {
		t.Fatal(err)
	}
	e.App.Service.FlushHistory()
	if p := c.b.login("ops@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("login: %d", p.status)
	}
	return c
}

func (c *complaint) createdAt(t *testing.T, id string) time.Time {
	t.Helper()
	var at time.Time
	if err := c.e.DB.Get(&at, `SELECT created_at FROM orders WHERE public_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return at.UTC()
}

// rowIDs are the order ids listed in the results.
func rowIDs(p page) []string {
	var ids []string
	p.doc.Find("#results table.orders tbody tr").Each(func(_ int, s *goquery.Selection) {
		ids = append(ids, strings.TrimSpace(s.Find("td").First().Text()))
	})
	slices.Sort(ids)
	return ids
}

func search(v url.Values) string { return "/admin/orders?" + v.Encode() }

func TestOrderSearchNarrows(t *testing.T) {
	c := newComplaint(t)
	_, otherClient := c.e.NewClient(t, "kiosk")
	minute := "2006-01-02T15:04"
	from := c.createdAt(t, c.tap1).Truncate(time.Minute).Format(minute)
	to := c.createdAt(t, c.tap2).Add(2 * time.Minute).Format(minute)
	all := []string{c.tap1, c.tap2, c.replay, c.euro, c.xss}
	tests := []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"nothing", url.Values{}, all},
		{"customer id", url.Values{"customer": {"cus_dt"}}, []string{c.tap1, c.tap2}},
		{"email in another case", url.Values{"email": {"deniz@example.COM"}}, []string{c.tap1, c.tap2}},
		{"card last 4", url.Values{"last4": {"4444"}}, []string{c.replay}},
		{"amount in major units", url.Values{"amount": {"49.90"}, "currency": {"TRY"}}, []string{c.tap1, c.tap2, c.replay}},
		{"amount with a decimal comma, no currency", url.Values{"amount": {"49,90"}}, []string{c.tap1, c.tap2, c.replay}},
		{"amount in euros, lower-case code", url.Values{"amount": {"12.5"}, "currency": {"eur"}}, []string{c.euro}},
		{"time window", url.Values{"from": {from}, "to": {to}}, []string{c.tap1, c.tap2}},
		{"client and card", url.Values{"client": {strconv.FormatInt(c.e.ClientID, 10)}, "last4": {"4242"}, "amount": {"49.90"}}, []string{c.tap1, c.tap2}},
		{"another client", url.Values{"client": {strconv.FormatInt(otherClient, 10)}}, nil},
		{"unknown customer", url.Values{"customer": {"cus_nobody"}}, nil},
		{"customer with markup", url.Values{"customer": {xssCustomer}}, []string{c.xss}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := c.b.do("GET", search(tt.query), nil)
			if p.status != http.StatusOK {
				t.Fatalf("status %d: %s", p.status, p.doc.Find(".error").Text())
			}
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if got := rowIDs(p); !slices.Equal(got, want) {
				t.Fatalf("orders %v, want %v", got, want)
			}
			if len(want) == 0 && !strings.Contains(p.doc.Find("#results .empty").Text(), "No orders match") {
				t.Fatal("no empty state")
			}
			if strings.Contains(p.body, xssCustomer) || strings.Contains(p.body, xssEmail) {
				t.Fatal("a customer field was rendered as markup")
			}
		})
	}

	// A row shows the payment, formatted amount, and links the order and its key.
	p := c.b.do("GET", search(url.Values{"customer": {"cus_rp"}}), nil)
	row := p.doc.Find("#results table.orders tbody tr").First()
	for _, want := range []string{"49.90 TRY", "succeeded · mastercard ••4444", "ch_", "rp-1"} {
		if !strings.Contains(row.Text(), want) {
			t.Errorf("row %q lacks %q", row.Text(), want)
		}
	}
	if href, _ := row.Find(`a[href^="/admin/keys/"]`).Attr("href"); href != fmt.Sprintf("/admin/keys/%d/rp-1", c.e.ClientID) {
		t.Errorf("key link %q", href)
	}
	if row.Find(fmt.Sprintf(`a[href="/admin/orders/%s"]`, c.replay)).Length() != 1 {
		t.Error("no link to the order")
	}
	if v, _ := c.b.do("GET", search(url.Values{"customer": {xssCustomer}}), nil).doc.Find(`input[name=customer]`).Attr("value"); v != xssCustomer {
		t.Errorf("the form lost the customer: %q", v)
	}
	if c.b.do("GET", "/admin", nil).doc.Find(`nav a[href="/admin/orders"]`).Length() != 1 {
		t.Error("no Orders link in the navigation")
	}
	key := c.b.do("GET", fmt.Sprintf("/admin/keys/%d/tap-1", c.e.ClientID), nil)
	if key.doc.Find(fmt.Sprintf(`a[href="/admin/orders/%s"]`, c.tap1)).Length() != 1 {
		t.Error("the key page does not link its order")
	}

	// A regular customer's 60 orders come in pages of 50; the pairs are above the first.
	if _, err := c.e.DB.Exec(`
		INSERT INTO orders (client_id, status, amount, currency, items, customer_id, created_at, updated_at)
		SELECT $1, 'pending', 100 + i, 'TRY', '[]', 'cus_many', now() - i * interval '1 minute', now()
		  FROM generate_series(1, 60) i`, c.e.ClientID); err != nil {
		t.Fatal(err)
	}
	first := c.b.do("GET", search(url.Values{"customer": {"cus_many"}}), nil)
	next, _ := first.doc.Find(`#results a[hx-get]`).Last().Attr("href")
	if n := len(rowIDs(first)); n != report.DefaultPageLimit || !strings.Contains(next, "after=") || first.doc.Find(".pairs").Length() != 1 {
		t.Fatalf("first page: %d rows, next %q", n, next)
	}
	second := c.b.do("GET", next, nil)
	if n := len(rowIDs(second)); second.status != http.StatusOK || n != 10 || second.doc.Find(".pairs").Length() != 0 {
		t.Fatalf("second page: %d, %d rows", second.status, n)
	}
	if ids := append(rowIDs(first), rowIDs(second)...); len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 60 {
		t.Fatal("the pages overlap")
	}
}

// pairs returns the suspected double taps listed, as "first-second" order ids.
func pairs(p page) []string {
	return p.doc.Find(".pairs .pair").Map(func(_ int, s *goquery.Selection) string {
		ids := s.Find(".side h3 a").Map(func(_ int, a *goquery.Selection) string {
			return strings.TrimPrefix(a.AttrOr("href", ""), "/admin/orders/")
		})
		return strings.Join(ids, "-")
	})
}

func TestDoubleTapsAreFlagged(t *testing.T) {
	c := newComplaint(t)
	tapPair := fmt.Sprintf("%s-%s", c.tap1, c.tap2)
	tests := []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"the double tap's customer", url.Values{"customer": {"cus_dt"}}, []string{tapPair}},
		{"by email and amount", url.Values{"email": {"DENIZ@example.com"}, "amount": {"49.90"}}, []string{tapPair}},
		{"the replayed order is one order", url.Values{"customer": {"cus_rp"}}, nil},
		{"a window shorter than the gap", url.Values{"customer": {"cus_dt"}, "window": {"10s"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := c.b.do("GET", search(tt.query), nil)
			if p.status != http.StatusOK {
				t.Fatalf("status %d", p.status)
			}
			if got := pairs(p); !slices.Equal(got, tt.want) {
				t.Fatalf("pairs %v, want %v", got, tt.want)
			}
			if len(tt.want) == 0 && !strings.Contains(p.doc.Find(".pairs .empty").Text(), "No suspected double taps") {
				t.Fatalf("no empty state: %q", p.doc.Find(".pairs").Text())
			}
		})
	}

	p := c.b.do("GET", search(url.Values{"customer": {"cus_dt"}}), nil)
	pair := p.doc.Find(".pairs .pair").First()
	for _, want := range []string{"30 s apart", "tap-1", "tap-2", "TekrarShop/2.1 (iPhone)", "127.0.0.1", "49.90 TRY", "1 × Latte", "succeeded · visa ••4242"} {
		if !strings.Contains(pair.Text(), want) {
			t.Errorf("the pair lacks %q: %s", want, pair.Text())
		}
	}
	if href, _ := pair.Find(`a[href^="/admin/orders/pair"]`).Attr("href"); href != fmt.Sprintf("/admin/orders/pair?first=%s&second=%s", c.tap1, c.tap2) {
		t.Errorf("compare link %q", href)
	}
	// The pairs come before the list of orders.
	if html, _ := p.doc.Find("#results").Html(); strings.Index(html, `class="pairs"`) > strings.Index(html, `class="orders"`) {
		t.Error("the pairs are not at the top of the results")
	}
	// Without a time range or a customer the detector is not run, and the page says why.
	amountOnly := c.b.do("GET", search(url.Values{"amount": {"49.90"}}), nil)
	if amountOnly.status != http.StatusOK || !strings.Contains(amountOnly.doc.Find(".pairs").Text(), "time range") {
		t.Fatalf("amount only: %d %q", amountOnly.status, amountOnly.doc.Find(".pairs").Text())
	}
}

// TEKRAR_DOUBLE_TAP_WINDOW is the default window; the form overrides it.
func TestDoubleTapWindowSetting(t *testing.T) {
	c := newComplaint(t, func(s *config.Server) { s.DoubleTapWindow = 10 * time.Second })
	p := c.b.do("GET", search(url.Values{"customer": {"cus_dt"}}), nil)
	if got := pairs(p); len(got) != 0 {
		t.Fatalf("30 s apart flagged within a 10 s window: %v", got)
	}
	if ph, _ := p.doc.Find(`input[name=window]`).Attr("placeholder"); ph != "10s" {
		t.Errorf("window placeholder %q, want the setting", ph)
	}
	p = c.b.do("GET", search(url.Values{"customer": {"cus_dt"}, "window": {"1m"}}), nil)
	if got := pairs(p); !slices.Equal(got, []string{fmt.Sprintf("%s-%s", c.tap1, c.tap2)}) {
		t.Fatalf("pairs with a 1m window: %v", got)
	}
}

func TestOrderPairConclusions(t *testing.T) {
	c := newComplaint(t)
	pair := func(first, second string) page {
		t.Helper()
		p := c.b.do("GET", fmt.Sprintf("/admin/orders/pair?first=%s&second=%s", first, second), nil)
		if p.status != http.StatusOK {
			t.Fatalf("pair %s/%s: %d %s", first, second, p.status, p.body)
		}
		return p
	}
	tests := []struct {
		name          string
		first, second string
		kind          string
		headline      []string
		facts         []string
	}{
		{"double tap", c.tap1, c.tap2, "twice",
			[]string{"Two different idempotency keys 30 s apart", "tekrar could not have merged them", "charged twice"},
			[]string{"Same customer: cus_dt", "Same amount: 49.90 TRY", "same device (TekrarShop/2.1 (iPhone))", fmt.Sprintf("refund the second order (%s)", c.tap2), "new idempotency key"}},
		{"double tap given newest first", c.tap2, c.tap1, "twice",
			[]string{"Two different idempotency keys 30 s apart", "charged twice"}, nil},
		{"replay", c.replay, c.replay, "once",
			[]string{"One key, 1 replay: the customer was charged once."},
			[]string{"1 repeat with the same key got the stored answer", "no new charge"}},
		{"two purchases", c.tap1, c.euro, "unclear",
			[]string{"Two different idempotency keys"},
			[]string{"Different customers: cus_dt (Deniz@Example.com) and cus_eu", "Different amounts: 49.90 TRY and 12.50 EUR", "two purchases"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pair(tt.first, tt.second)
			v := p.doc.Find("section.verdict")
			if !v.HasClass(tt.kind) {
				t.Errorf("verdict class %q, want %q", v.AttrOr("class", ""), tt.kind)
			}
			head := v.Find(".headline").Text()
			for _, want := range tt.headline {
				if !strings.Contains(head, want) {
					t.Errorf("headline %q lacks %q", head, want)
				}
			}
			for _, want := range tt.facts {
				if !strings.Contains(v.Text(), want) {
					t.Errorf("verdict lacks %q: %s", want, v.Text())
				}
			}
		})
	}
	if n := pair(c.replay, c.replay).doc.Find(".pair-cols > section").Length(); n != 1 {
		t.Errorf("an order compared with itself is shown %d times", n)
	}
	// Both orders are shown side by side with their keys' timelines.
	p := pair(c.tap2, c.tap1)
	cols := p.doc.Find(".pair-cols > section")
	if cols.Length() != 2 || !strings.Contains(cols.Eq(0).Text(), "tap-1") || !strings.Contains(cols.Eq(1).Text(), "tap-2") {
		t.Fatalf("columns: %d", cols.Length())
	}
	if n := cols.Find("table .event.created").Length(); n != 2 {
		t.Errorf("%d created events in the timelines, want 2", n)
	}
	x := pair(c.tap1, c.xss)
	for _, bad := range []string{xssCustomer, xssMeta, xssEmail} {
		if strings.Contains(x.body, bad) {
			t.Errorf("%q rendered as markup on the pair page", bad)
		}
	}
	if !strings.Contains(x.doc.Find("section.verdict").Text(), xssCustomer) {
		t.Error("the customer with markup is not shown as text")
	}
}

func TestOrderPage(t *testing.T) {
	c := newComplaint(t)
	refund := c.e.Do(t, "POST", fmt.Sprintf("/v1/orders/%s/refunds", c.replay), c.e.Secret,
		[]byte(`{"amount":1000,"reason":"cold coffee"}`), "Idempotency-Key", "rf-1")
	if refund.Status != http.StatusCreated {
		t.Fatalf("refund: %d %s", refund.Status, refund.Body)
	}
	c.e.App.Service.FlushHistory()
	var charge string
	if err := c.e.DB.Get(&charge, `SELECT p.provider_charge_id FROM payments p JOIN orders o ON o.id = p.order_id WHERE o.public_id = $1`, c.replay); err != nil {
		t.Fatal(err)
	}
	get := func(id string) page {
		t.Helper()
		p := c.b.do("GET", fmt.Sprintf("/admin/orders/%s", id), nil)
		if p.status != http.StatusOK {
			t.Fatalf("order %s: %d", id, p.status)
		}
		return p
	}

	p := get(c.replay)
	for _, want := range []string{charge, "succeeded", "mastercard ••4444", "49.90 TRY", "10.00 TRY", "cus_rp", "rp@example.com", "Latte"} {
		if !strings.Contains(p.doc.Find("main").Text(), want) {
			t.Errorf("the order page lacks %q", want)
		}
	}
	if got := p.doc.Find("table.refunds tbody tr").Text(); !strings.Contains(got, "10.00 TRY") || !strings.Contains(got, "cold coffee") || !strings.Contains(got, "rf-1") {
		t.Errorf("refunds %q", got)
	}
	keys := p.doc.Find(".keyblock")
	if keys.Length() != 2 || !strings.Contains(keys.Eq(0).Text(), "rp-1") || !strings.Contains(keys.Eq(1).Text(), "rf-1") {
		t.Fatalf("keys: %d %q", keys.Length(), keys.Text())
	}
	if kinds := keys.Eq(0).Find(".event").Map(func(_ int, s *goquery.Selection) string { return s.Text() }); strings.Join(kinds, ",") != "created,completed,replayed" {
		t.Errorf("order key timeline %v", kinds)
	}
	if !strings.Contains(p.doc.Find("section.verdict .headline").Text(), "One key, 1 replay: the customer was charged once.") {
		t.Errorf("verdict %q", p.doc.Find("section.verdict").Text())
	}
	if p.doc.Find("section#order-actions").Length() != 1 {
		t.Error("no place for the order's actions")
	}

	// Empty states: no refunds, no metadata.
	tap := get(c.tap1)
	for _, want := range []string{"No refunds.", "No metadata."} {
		if !strings.Contains(tap.doc.Find(".empty").Text(), want) {
			t.Errorf("no empty state %q", want)
		}
	}

	// Markup in the customer id, email and metadata stays text.
	x := get(c.xss)
	for _, bad := range []string{xssCustomer, xssMeta, xssEmail} {
		if strings.Contains(x.body, bad) {
			t.Errorf("%q rendered as markup on the order page", bad)
		}
		if !strings.Contains(x.doc.Find("main").Text(), bad) {
			t.Errorf("%q not shown as text", bad)
		}
	}

	// Once swept, the keys are still listed: first with their rows, then tombstones only.
	c.e.Clock.Advance(25 * time.Hour)
	for range 2 {
		if _, err := c.e.App.Sweeper.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.e.Clock.Advance(2 * c.e.Config.SweepSettle)
	}
	var rows int
	if err := c.e.DB.Get(&rows, `SELECT count(*) FROM idempotency_keys`); err != nil || rows != 0 {
		t.Fatalf("%d key rows left after sweeping (%v)", rows, err)
	}
	if p := c.b.login("ops@example.com", password); p.status != http.StatusSeeOther { // the session expired meanwhile
		t.Fatalf("login: %d", p.status)
	}
	swept := get(c.replay)
	keys = swept.doc.Find(".keyblock")
	if keys.Length() != 2 || keys.Find(".state.expired").Length() != 2 || !strings.Contains(keys.Text(), "refused until") {
		t.Fatalf("swept keys: %d %q", keys.Length(), keys.Text())
	}
}

func TestOrderPagesRefuseBadInput(t *testing.T) {
	c := newComplaint(t)
	tests := []struct {
		name  string
		query string
		want  string // in the message
	}{
		{"amount not a number", "amount=abc", "not a number"},
		{"amount with too many decimals", "amount=49.999&currency=TRY", "decimals"},
		{"amount zero", "amount=0", "more than 0"},
		{"card digits", "last4=12x", "4 digits"},
		{"card too long", "last4=42424", "4 digits"},
		{"client", "client=shop", "client id"},
		{"currency", "currency=XYZ&amount=1", "ISO 4217"},
		{"time", "from=yesterday", "2026-12-02T14:00"},
		{"time range backwards", "from=2026-01-02T10:00&to=2026-01-01T10:00", "before"},
		{"window zero", "customer=cus_dt&window=0s", "window"},
		{"window too long", "customer=cus_dt&window=48h", "window"},
		{"window not a duration", "customer=cus_dt&window=soon", "window"},
		{"page cursor", "after=garbage", "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := c.b.do("GET", "/admin/orders?"+tt.query, nil)
			if p.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", p.status)
			}
			msg := p.doc.Find("#results .error").Text()
			if !strings.Contains(msg, tt.want) {
				t.Fatalf("message %q lacks %q", msg, tt.want)
			}
			if p.doc.Find(`form[action="/admin/orders"]`).Length() != 1 {
				t.Fatal("the form is gone")
			}
		})
	}
	// Orders are addressed by their public ids: an internal integer id is no order.
	var internal int64
	if err := c.e.DB.Get(&internal, `SELECT id FROM orders WHERE public_id = $1`, c.tap1); err != nil {
		t.Fatal(err)
	}
	unknown := "ord_" + strings.Repeat("0", 32)
	for path, want := range map[string]int{
		"/admin/orders/abc":    http.StatusNotFound,
		"/admin/orders/0":      http.StatusNotFound,
		"/admin/orders/999999": http.StatusNotFound,
		"/admin/orders/" + strconv.FormatInt(internal, 10):          http.StatusNotFound,
		"/admin/orders/" + unknown:                                  http.StatusNotFound,
		"/admin/orders/pair?first=abc&second=1":                     http.StatusBadRequest,
		"/admin/orders/pair?first=" + c.tap1:                        http.StatusBadRequest,
		"/admin/orders/pair?first=" + c.tap1 + "&second=1":          http.StatusBadRequest,
		"/admin/orders/pair?first=" + c.tap1 + "&second=" + unknown: http.StatusNotFound,
		"/admin/orders/pair?first=999999&second=-1":                 http.StatusBadRequest,
	} {
		if p := c.b.do("GET", path, nil); p.status != want {
			t.Errorf("GET %s: %d, want %d", path, p.status, want)
		}
	}
}

func TestOrderPagesNeedSignIn(t *testing.T) {
	e := apptest.New(t)
	b := newBrowser(t, e)
	for _, path := range []string{"/admin/orders", "/admin/orders?customer=cus_1", "/admin/orders/1", "/admin/orders/pair?first=1&second=2"} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/admin/login?next="+url.QueryEscape(path) {
			t.Errorf("GET %s signed out: %d %s", path, p.status, p.header.Get("Location"))
		}
	}
}
