package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// setZone gives the browser the zone cookie console.js sets.
func (b *browser) setZone(zone string) {
	u, _ := url.Parse(b.base + "/admin")
	b.hc.Jar.SetCookies(u, []*http.Cookie{{Name: "tekrar_tz", Value: zone, Path: "/admin"}})
}

// One zone on the whole console: a time is shown in the operator's zone, labelled, with
// UTC in its title, and a time typed in a search is read in that same zone, so that the
// time copied from a table finds its row. Before, tables showed the browser's time with no
// zone while the key page and the searches used UTC: in Istanbul nothing was found.
func TestTimesInTheOperatorsZone(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	id := actOrder(t, e, "k-zone", 4500)
	key := keyPath(e, "k-zone")
	var created time.Time
	if err := e.DB.Get(&created, `SELECT created_at FROM orders WHERE public_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	ids := id
	// The key page's first time is its timeline's first event, the request's arrival, which
	// is stamped moments apart from the order's creation (a second boundary may fall between
	// them on a loaded machine): each page is checked against the instant it shows.
	e.App.Service.FlushHistory()
	var arrived time.Time
	if err := e.DB.Get(&arrived, `SELECT min(at) FROM key_events WHERE client_id = $1 AND key = 'k-zone' AND kind = 'created'`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	instant := func(page string) time.Time {
		if page == key {
			return arrived
		}
		return created
	}
	tests := []struct {
		cookie, zone string // the cookie sent; the zone the console must use
	}{
		{"", "UTC"},
		{"Europe/Istanbul", "Europe/Istanbul"},
		{"America/New_York", "America/New_York"},
		{"Not/A_Zone", "UTC"},
		{"../../etc/passwd", "UTC"},
		{"Local", "UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.cookie, func(t *testing.T) {
			b.setZone(tt.cookie)
			loc, err := time.LoadLocation(tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			local := created.In(loc)
			for _, page := range []string{"/admin/orders?customer=cus_<b>", "/admin/orders/" + ids, key, "/admin/keys?key=k-zone"} {
				at := instant(page)
				shown := at.In(loc).Format("2006-01-02 15:04:05")
				p := b.do("GET", page, nil)
				tm := p.doc.Find("main time").First()
				if p.status != 200 || tm.Length() == 0 {
					t.Fatalf("%s: %d, no time", page, p.status)
				}
				if got := strings.Join(strings.Fields(tm.Text()), " "); got != shown+" "+tt.zone {
					t.Errorf("%s shows %q, want %q", page, got, shown+" "+tt.zone)
				}
				if title, _ := tm.Attr("title"); title != at.UTC().Format("2006-01-02 15:04:05")+" UTC" {
					t.Errorf("%s: title %q, want the UTC instant", page, title)
				}
			}
			// The search reads its times in the same zone: the minute shown finds the order.
			for _, search := range []string{"/admin/orders", "/admin/keys"} {
				q := url.Values{"from": {local.Truncate(time.Minute).Format("2006-01-02T15:04")},
					"to": {local.Add(time.Minute).Format("2006-01-02T15:04:05")}}
				if search == "/admin/orders" {
					q.Set("customer", "cus_<b>")
				}
				p := b.do("GET", search+"?"+q.Encode(), nil)
				if p.status != 200 || !strings.Contains(p.body, `href="/admin/orders/`+ids+`"`) && !strings.Contains(p.body, "k-zone") {
					t.Errorf("%s from %s to %s in %s: the order is not found (%d)", search, q.Get("from"), q.Get("to"), tt.zone, p.status)
				}
				if label := p.doc.Find(`label:has(input[name=from])`).Text(); !strings.Contains(label, "("+tt.zone+")") {
					t.Errorf("%s: the from field says %q, not its zone", search, label)
				}
			}
		})
	}
}
