package admin_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

const evilKey = `<script>alert(1)</script>`

// order sends a payment through the API, as an app would.
func order(t *testing.T, e *apptest.Env, key, itemName string, amount int64) {
	t.Helper()
	body := fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"X","name":%q,"quantity":1,"unit_amount":%d}],"amount":%d,
		"payment":{"card_token":"tok_visa"},"customer":{"id":"cus_<b>","email":"ayse@example.com"}}`, itemName, amount, amount)
	r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(body), "Idempotency-Key", key, "User-Agent", `pos"><i>1`)
	if r.Status != 201 {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
}

func TestConsolePages(t *testing.T) {
	e := apptest.New(t)
	newOperator(t, e, "viewer@example.com", admin.RoleViewer)
	order(t, e, evilKey, `<img src=x onerror=alert(1)>`, 4500)
	order(t, e, evilKey, `<img src=x onerror=alert(1)>`, 4500) // a replay
	order(t, e, "k-plain", "Latte", 9000)
	e.App.Service.FlushHistory()

	b := newBrowser(t, e)
	if p := b.login("viewer@example.com", password); p.status != http.StatusSeeOther {
		t.Fatalf("login: %d", p.status)
	}

	home := b.do("GET", "/admin?window=hour", nil)
	if home.status != 200 {
		t.Fatalf("overview: %d", home.status)
	}
	stats := map[string]string{}
	home.doc.Find(".stats li").Each(func(_ int, s *goquery.Selection) {
		stats[strings.TrimSpace(strings.TrimPrefix(s.Text(), s.Find("strong").Text()))] = s.Find("strong").Text()
	})
	if stats["first executions"] != "2" || stats["replays"] != "1" || stats["keyed requests"] != "3" {
		t.Fatalf("overview stats %v", stats)
	}
	if home.doc.Find(".chart svg rect.replayed").Length() == 0 {
		t.Fatal("no chart")
	}

	list := b.do("GET", "/admin/keys", nil)
	if list.status != 200 || list.doc.Find("#rows tbody tr").Length() != 2 {
		t.Fatalf("key list: %d, %d rows", list.status, list.doc.Find("#rows tbody tr").Length())
	}
	if strings.Contains(list.body, evilKey) || !strings.Contains(list.doc.Find("#rows").Text(), evilKey) {
		t.Fatal("a key was rendered as markup, or not at all")
	}
	filtered := b.do("GET", "/admin/keys?key=k-plain", nil)
	if n := filtered.doc.Find("#rows tbody tr").Length(); n != 1 {
		t.Fatalf("filter by key: %d rows", n)
	}
	if p := b.do("GET", "/admin/keys?order=abc", nil); p.status != http.StatusBadRequest || p.doc.Find(".error").Length() != 1 {
		t.Fatalf("bad filter: %d", p.status)
	}

	href, _ := list.doc.Find(`#rows a[href^="/admin/keys/"]`).First().Attr("href")
	detail := b.do("GET", href, nil)
	if detail.status != 200 {
		t.Fatalf("key page %s: %d", href, detail.status)
	}
	for _, bad := range []string{evilKey, `<img src=x onerror=alert(1)>`, `"><i>1`, "cus_<b>"} {
		if strings.Contains(detail.body, bad) {
			t.Fatalf("%q rendered unescaped on the key page", bad)
		}
	}
	kinds := detail.doc.Find("table .event").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	if strings.Join(kinds, ",") != "created,completed,replayed" && strings.Join(kinds, ",") != "created,completed" {
		t.Fatalf("timeline %v", kinds)
	}
	if !strings.Contains(detail.doc.Find("pre.json").Text(), `"status": "paid"`) {
		t.Fatalf("stored response not shown: %s", detail.doc.Find("pre.json").Text())
	}
	if p := b.do("GET", "/admin/keys/1/"+url.PathEscape("no-such-key"), nil); p.status != http.StatusNotFound {
		t.Fatalf("unknown key: %d", p.status)
	}
}
