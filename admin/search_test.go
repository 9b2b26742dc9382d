package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// searchSeed is one order of each id kind the search box finds, made through the API as
// clients make them, and a provider event of its charge written as the inbox records one.
type searchSeed struct {
	order, charge, refund, providerRefund string // order A and its charge and refund
	sale                                  string // the order of an oversold register sale
	shared                                [2]string
	otherClient                           string // the name of the client of shared[1]
}

func seedSearch(t *testing.T, e *apptest.Env) searchSeed {
	t.Helper()
	var s searchSeed
	send := func(secret, key, body string) {
		t.Helper()
		if r := e.Do(t, "POST", "/v1/orders", secret, []byte(body), "Idempotency-Key", key); r.Status != http.StatusCreated {
			t.Fatalf("order %s: %d %s", key, r.Status, r.Body)
		}
	}
	orderOf := func(key string) string {
		t.Helper()
		var id string
		if err := e.DB.Get(&id, `SELECT o.public_id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id WHERE k.key = $1
			ORDER BY k.client_id LIMIT 1`, key); err != nil {
			t.Fatal(err)
		}
		return id
	}
	send(e.Secret, "srch-a", `{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":7391}],"amount":7391,
		"payment":{"card_token":"tok_mastercard"},"customer":{"id":"Zeynep Kaya","email":"Zeynep.Kaya@Example.com"}}`)
	s.order = orderOf("srch-a")
	if r := e.Do(t, "POST", "/v1/orders/"+s.order+"/refunds", e.Secret, []byte(`{"amount":100,"reason":"asked"}`),
		"Idempotency-Key", "srch-a-refund"); r.Status != http.StatusCreated {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	if err := e.DB.QueryRow(`SELECT p.provider_charge_id, r.public_id, r.provider_refund_id
		  FROM orders o JOIN payments p ON p.order_id = o.id JOIN refunds r ON r.order_id = o.id WHERE o.public_id = $1`,
		s.order).Scan(&s.charge, &s.refund, &s.providerRefund); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(`INSERT INTO provider_events (provider, event_id, type, charge_id, sequence, body, outcome,
		received_at, last_delivery_at) VALUES ('sandbox', 'evt_srch_1', 'charge.succeeded', $1, 1, '{}', 'applied', now(), now())`,
		s.charge); err != nil {
		t.Fatal(err)
	}
	// A register's cash sale of a product out of stock: oversold.
	if r := e.Do(t, "PUT", "/v1/products/SRCH", e.Secret, []byte(`{"name":"Beans","price":1000,"currency":"TRY","stock":0}`)); r.Status != 201 {
		t.Fatalf("put product: %d %s", r.Status, r.Body)
	}
	batch := `{"batch_key":"srch-q","register":{"id":"till-9","name":"Back till"},"sales":[{"idempotency_key":"srch-sale-1",
		"sold_at":"2026-05-01T09:30:00Z","order":{"currency":"TRY","amount":1000,"payment":{"method":"cash"},
		"items":[{"sku":"SRCH","name":"Beans","quantity":1,"unit_amount":1000,"from_stock":true}]}}]}`
	if r := e.Do(t, "POST", "/v1/pos/sales", e.Secret, []byte(batch)); r.Status != 200 || !strings.Contains(string(r.Body), `"oversold":true`) {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	s.sale = orderOf("srch-sale-1")
	// One key, two clients: the console is the operators', it finds both.
	s.otherClient = "Other <b>shop</b>"
	secret, _ := e.NewClient(t, s.otherClient)
	shared := `{"currency":"TRY","items":[{"sku":"X","name":"Tea","quantity":1,"unit_amount":500}],"amount":500,"payment":{"card_token":"tok_visa"}}`
	send(e.Secret, "shared-key", shared)
	send(secret, "shared-key", shared)
	var ids []string
	if err := e.DB.Select(&ids, `SELECT o.public_id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id
		 WHERE k.key = 'shared-key' ORDER BY k.client_id`); err != nil || len(ids) != 2 {
		t.Fatalf("shared orders %v: %v", ids, err)
	}
	s.shared = [2]string{ids[0], ids[1]}
	return s
}

// The one search box finds an order by each kind of id, and goes straight to its page
// when one thing matches; lists every match (with its client) when several do; says so when
// none does; and takes hostile input as text to look for, its LIKE wildcards as themselves.
func TestSearchFindsEveryIdKind(t *testing.T) {
	e := apptest.New(t)
	s := seedSearch(t, e)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	search := func(q string) page {
		t.Helper()
		return b.do("GET", "/admin/search?q="+url.QueryEscape(q), nil)
	}
	orderPage := func(id string) string { return "/admin/orders/" + id }

	for _, c := range []struct{ name, q, want string }{
		{"order id", s.order, orderPage(s.order)},
		{"idempotency key", "srch-a", orderPage(s.order)},
		{"refund's key", "srch-a-refund", orderPage(s.order)},
		{"charge id", s.charge, orderPage(s.order)},
		{"refund id", s.refund, orderPage(s.order)},
		{"provider refund id", s.providerRefund, orderPage(s.order)},
		{"e-mail prefix, any case", "zeynep.KAYA@ex", orderPage(s.order)},
		{"customer id prefix, any case", "ZEYNEP K", orderPage(s.order)},
		{"card last 4", "4444", orderPage(s.order)},
		{"amount", "73.91", orderPage(s.order)},
		{"amount with currency", "73.91 TRY", orderPage(s.order)},
		{"currency and amount", "try 73,91", orderPage(s.order)},
		{"amount in minor units", "  7391 ", ""}, // four digits: a card's last four, no card ends so
		{"register sale", "srch-sale-1", orderPage(s.sale)},
		{"provider event", "evt_srch_1", orderPage(s.order)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := search(c.q)
			if c.want == "" {
				if p.status != http.StatusOK || !strings.Contains(p.body, "Nothing matches") {
					t.Fatalf("%q: %d, want the empty result: %s", c.q, p.status, p.body)
				}
				return
			}
			if p.status != http.StatusSeeOther || p.header.Get("Location") != c.want {
				t.Fatalf("%q: %d to %q, want 303 to %q: %s", c.q, p.status, p.header.Get("Location"), c.want, p.body)
			}
		})
	}

	t.Run("ambiguous key lists both clients' orders", func(t *testing.T) {
		p := search("shared-key")
		if p.status != http.StatusOK {
			t.Fatalf("%d %s", p.status, p.body)
		}
		rows := p.doc.Find("#search-key table.search-results tbody tr")
		if rows.Length() != 2 {
			t.Fatalf("%d rows, want 2: %s", rows.Length(), p.body)
		}
		for _, id := range s.shared {
			if p.doc.Find(`#search-key a[href="/admin/orders/`+id+`"]`).Length() == 0 {
				t.Errorf("order %s is not linked", id)
			}
		}
		if !strings.Contains(p.doc.Find("#search-key").Text(), s.otherClient) || strings.Contains(p.body, "<b>shop</b>") {
			t.Errorf("the other client's name is missing, or rendered as markup: %s", p.body)
		}
		if v, _ := p.doc.Find(`form[action="/admin/search"] input[name=q]`).Attr("value"); v != "shared-key" {
			t.Errorf("the search box holds %q, want the query", v)
		}
	})

	t.Run("no match", func(t *testing.T) {
		for _, q := range []string{"no-such-thing", "ord_00000000000000000000000000000000", "evt_nope", "re_nope", "ch_nope", "0000"} {
			if p := search(q); p.status != http.StatusOK || !strings.Contains(p.body, "Nothing matches") {
				t.Errorf("%q: %d, want a clear empty result: %s", q, p.status, p.body)
			}
		}
	})

	t.Run("hostile input", func(t *testing.T) {
		for _, q := range []string{`%`, `_`, `zeynep%`, `z_ynep`, `%@%`, `\`, `'; DROP TABLE orders; --`, `"><script>alert(1)</script>`,
			strings.Repeat("a", 10*1024)} {
			p := search(q)
			if p.status != http.StatusOK {
				t.Fatalf("%.40q: %d, want 200: %.500s", q, p.status, p.body)
			}
			if p.doc.Find(`a[href="/admin/orders/`+s.order+`"]`).Length() != 0 {
				t.Errorf("%.40q matched order A: a LIKE wildcard was not escaped", q)
			}
			if strings.Contains(p.body, "<script>alert(1)") {
				t.Errorf("%.40q was rendered as markup", q)
			}
		}
		// Text Postgres cannot hold is refused before any page, as in every console URL.
		for _, q := range []string{"a\x00b", "\xff\xfe"} {
			if p := search(q); p.status != http.StatusBadRequest {
				t.Errorf("%q: %d, want 400", q, p.status)
			}
		}
		var n int
		if err := e.DB.Get(&n, `SELECT count(*) FROM orders`); err != nil || n == 0 {
			t.Fatalf("orders: %d %v", n, err)
		}
	})

	t.Run("the box is on every page", func(t *testing.T) {
		for _, path := range []string{"/admin", "/admin/keys", orderPage(s.order), "/admin/inbox"} {
			p := b.do("GET", path, nil)
			f := p.doc.Find(`header form[action="/admin/search"][method="get"]`)
			in := f.Find(`input[name=q][inputmode=text][autocapitalize=off][spellcheck=false]`)
			if f.Length() != 1 || in.Length() != 1 {
				t.Errorf("%s: no search box of the layout's shape in the header", path)
			}
			if ty, _ := in.Attr("type"); ty != "search" {
				t.Errorf("%s: the search box is a %q input", path, ty)
			}
		}
	})
}

// The inbox has its own search: an event by its id, the events of a type, the events of an
// order's charges. A register's oversold sales are a page of their own, linked from the
// registers page, each sale linking its order.
func TestInboxSearchAndOversoldSales(t *testing.T) {
	e := apptest.New(t)
	s := seedSearch(t, e)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	for _, q := range []string{"evt_srch_1", "charge.succeeded", s.order} {
		p := b.do("GET", "/admin/inbox?q="+url.QueryEscape(q), nil)
		rows := p.doc.Find("table.inbox tbody tr")
		if p.status != http.StatusOK || rows.Length() != 1 || !strings.Contains(rows.Text(), "evt_srch_1") {
			t.Errorf("inbox ?q=%s: %d, %d rows, want evt_srch_1 alone", q, p.status, rows.Length())
		}
		if v, _ := p.doc.Find(`main form[action="/admin/inbox"] input[name=q]`).Attr("value"); v != q {
			t.Errorf("inbox ?q=%s: the inbox's search holds %q", q, v)
		}
	}
	for _, q := range []string{"evt_none", "%", "ord_00000000000000000000000000000000", strings.Repeat("x", 10*1024)} {
		p := b.do("GET", "/admin/inbox?q="+url.QueryEscape(q), nil)
		if p.status != http.StatusOK || p.doc.Find("table.inbox tbody tr").Length() != 0 {
			t.Errorf("inbox ?q=%.20s: %d, want 200 and no events", q, p.status)
		}
	}

	list := b.do("GET", "/admin/registers", nil)
	link := list.doc.Find(`table.registers a[href^="/admin/registers/oversold?register="]`)
	href, _ := link.Attr("href")
	if link.Length() != 1 || strings.TrimSpace(link.Text()) != "1" {
		t.Fatalf("the registers page does not link the oversold sale: %s", list.body)
	}
	p := b.do("GET", href, nil)
	if p.status != http.StatusOK || p.doc.Find(`table.oversold a[href="/admin/orders/`+s.sale+`"]`).Length() != 1 ||
		!strings.Contains(p.body, "srch-sale-1") {
		t.Fatalf("%s: %d, want the sale linking its order: %s", href, p.status, p.body)
	}
	if p := b.do("GET", "/admin/registers/oversold", nil); p.doc.Find(`table.oversold a[href="/admin/orders/`+s.sale+`"]`).Length() != 1 {
		t.Errorf("every register's oversold sales: %d, the sale is not listed", p.status)
	}
	if p := b.do("GET", "/admin/registers/oversold?register=999999", nil); p.status != http.StatusOK || p.doc.Find("table.oversold").Length() != 0 {
		t.Errorf("a register with no oversold sale: %d, want 200 and none", p.status)
	}
	if p := b.do("GET", "/admin/registers/oversold?register=x", nil); p.status != http.StatusBadRequest {
		t.Errorf("register=x: %d, want 400", p.status)
	}
}

// An operator searches each kind of id from the console's home: one click in the header's
// box, the id typed, Enter, and the order's page is open. The results page of an ambiguous
// search fits a phone's width.
func TestSearchInABrowser(t *testing.T) {
	path := needChromium(t)
	e := apptest.New(t)
	s := seedSearch(t, e)
	newOperator(t, e, "ops@example.com", admin.RoleViewer)
	c := newChrome(t, path, e.URL)
	c.signIn("ops@example.com")
	box := `header form[action="/admin/search"] input[name=q]`
	for _, q := range []struct{ q, want string }{
		{s.order, s.order}, {"srch-a", s.order}, {s.charge, s.order}, {s.refund, s.order}, {s.providerRefund, s.order},
		{"zeynep.kaya@", s.order}, {"4444", s.order}, {"73.91 TRY", s.order}, {"srch-sale-1", s.sale}, {"evt_srch_1", s.order},
	} {
		c.open("/admin")
		if status := c.navigate("search "+q.q, chromedp.Click(chromedp.CSS(box), chromedp.NodeVisible),
			chromedp.SendKeys(chromedp.CSS(box), q.q+"\r")); status != http.StatusOK {
			t.Fatalf("search %q: %d", q.q, status)
		}
		if got := c.location(); got != "/admin/orders/"+q.want {
			t.Errorf("search %q landed on %s, want the order %s", q.q, got, q.want)
		}
	}
	c.open("/admin/search?q=shared-key")
	if n := c.count("#search-key tbody tr"); n != 2 {
		t.Fatalf("ambiguous search: %d rows, want 2", n)
	}
	if mode := c.attr(box, "inputmode"); mode != "text" {
		t.Errorf("the search box's inputmode is %q", mode)
	}
	c.phone()
	c.open("/admin/search?q=shared-key")
	wide, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if wide {
		t.Error("the results page is wider than a phone")
	}
	c.shoot("search-phone", false)
	if p := c.problems(); len(p) > 0 {
		t.Errorf("the browser reported problems: %v", p)
	}
}
