package admin_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// compensate writes the compensation the completer writes when it gives up on an order's
// charge (checkout/compensate.go), then moves it to state as the worker leaves it; it
// returns the row's id.
func compensate(t *testing.T, e *apptest.Env, order, state, reason string, ageMinutes int) int64 {
	t.Helper()
	var id int64
	if err := e.DB.Get(&id, `
		INSERT INTO compensations (client_id, order_id, charge_key, reason, next_attempt_at, watch_until, created_at)
		SELECT client_id, id, 'pk-' || public_id, $2, now() + interval '30 seconds', now() + interval '1 day',
		       now() - $3 * interval '1 minute'
		  FROM orders WHERE public_id = $1
		RETURNING id`, order, reason, ageMinutes); err != nil {
		t.Fatal(err)
	}
	var err error
	switch state {
	case "watching":
		_, err = e.DB.Exec(`UPDATE compensations SET attempts = 2, last_error = 'provider unavailable: 503' WHERE id = $1`, id)
	case "refunded":
		_, err = e.DB.Exec(`
			UPDATE compensations SET state = 'refunded', charge_id = 'ch_late', refund_id = 're_back', amount = 4500,
			       currency = 'TRY', attempts = 1, settled_at = now() - $2 * interval '1 second' WHERE id = $1`, id, ageMinutes)
	case "no_charge":
		_, err = e.DB.Exec(`UPDATE compensations SET state = 'no_charge', attempts = 5, settled_at = now() - $2 * interval '1 second'
			WHERE id = $1`, id, ageMinutes)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The compensations list: every refund tekrar owes or made for a charge it gave up on, those
// still watching first, with state, reason, charge, refund, amount, attempts and last error;
// a state or a client narrows it. The order's page and the key's page link to the row, and
// the overview counts them.
func TestCompensationsList(t *testing.T) {
	e := apptest.New(t)
	otherSecret, otherID := e.NewClient(t, "other app")
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	evil := `<script>alert(1)</script>`
	watchOld := actOrder(t, e, "k-w-old", 4500)
	watchNew := actOrder(t, e, "k-w-new", 4500)
	refunded := actOrder(t, e, "k-refunded", 4500)
	noCharge := paidOrder(t, e, otherSecret, "k-none", 4500)
	ids := map[string]int64{
		"w-old":    compensate(t, e, watchOld, "watching", evil, 90),
		"w-new":    compensate(t, e, watchNew, "watching", "completer gave up", 10),
		"refunded": compensate(t, e, refunded, "refunded", "completer gave up", 60),
		"none":     compensate(t, e, noCharge, "no_charge", "completer gave up", 30),
	}
	anchor := func(name string) string { return "compensation-" + strconv.FormatInt(ids[name], 10) }
	rowsOf := func(p page) []string {
		var out []string
		p.doc.Find("table.compensations tbody tr").Each(func(_ int, tr *goquery.Selection) {
			id, _ := tr.Attr("id")
			out = append(out, id)
		})
		return out
	}
	mine, other := strconv.FormatInt(e.ClientID, 10), strconv.FormatInt(otherID, 10)
	tests := []struct {
		query string
		want  []string
	}{
		// Watching first, the oldest first; then settled, the latest settled first.
		{"", []string{"w-old", "w-new", "none", "refunded"}},
		{"?state=all", []string{"w-old", "w-new", "none", "refunded"}},
		{"?state=watching", []string{"w-old", "w-new"}},
		{"?state=refunded", []string{"refunded"}},
		{"?state=no_charge", []string{"none"}},
		{"?state=already_refunded", nil},
		{"?client=" + mine, []string{"w-old", "w-new", "refunded"}},
		{"?client=" + other, []string{"none"}},
		{"?state=watching&client=" + other, nil},
		{"?order=" + refunded, []string{"refunded"}},
	}
	for _, tt := range tests {
		p := b.do("GET", "/admin/compensations"+tt.query, nil)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.query, p.status, p.body)
		}
		var want []string
		for _, w := range tt.want {
			want = append(want, anchor(w))
		}
		if got := rowsOf(p); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("compensations%s: %v, want %v (%v)", tt.query, got, want, ids)
		}
	}

	p := b.do("GET", "/admin/compensations", nil)
	for sel, want := range map[string]string{"#count-watching": "2", "#count-refunded": "1", "#count-no-charge": "1", "#count-already-refunded": "0"} {
		if got := p.doc.Find(sel).Text(); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	cells := func(id string) []string {
		var out []string
		p.doc.Find("tr#" + id + " td").Each(func(_ int, td *goquery.Selection) { out = append(out, strings.Join(strings.Fields(td.Text()), " ")) })
		return out
	}
	if got := cells(anchor("w-old")); len(got) != 13 || got[0] != "watching" || got[3] != evil || got[7] != "2" ||
		got[8] != "provider unavailable: 503" || got[9] == "—" || got[12] != "—" {
		t.Errorf("the watching row: %q", got)
	}
	if got := cells(anchor("refunded")); len(got) != 13 || got[0] != "refunded" || !strings.HasPrefix(got[4], "ch_late") ||
		got[5] != "re_back" || got[6] != "45.00 TRY" || got[9] != "—" || got[12] == "—" {
		t.Errorf("the refunded row: %q", got)
	}
	if got := cells(anchor("none")); len(got) != 13 || got[0] != "no charge" || got[2] != "other app ("+other+")" {
		t.Errorf("the no-charge row: %q", got)
	}
	if strings.Contains(p.body, evil) {
		t.Error("a compensation's reason was rendered as markup")
	}
	orderLink, _ := p.doc.Find("tr#" + anchor("refunded") + " a.order").Attr("href")
	chargeLink, _ := p.doc.Find("tr#" + anchor("refunded") + " td").Eq(4).Find("a").Attr("href")
	if orderLink != "/admin/orders/"+refunded || chargeLink != "/admin/inbox?charge=ch_late" {
		t.Errorf("the refunded row links %q and %q", orderLink, chargeLink)
	}
	for _, href := range []string{orderLink, chargeLink} {
		if q := b.do("GET", href, nil); q.status != http.StatusOK {
			t.Errorf("GET %s: %d", href, q.status)
		}
	}

	// The order's page and the key's page link to the compensation's row.
	for _, from := range []string{"/admin/orders/" + watchOld, keyPath(e, "k-w-old")} {
		q := b.do("GET", from, nil)
		var hrefs []string
		q.doc.Find(`a[href*="/admin/compensations?"]`).Each(func(_ int, a *goquery.Selection) {
			h, _ := a.Attr("href")
			hrefs = append(hrefs, h)
		})
		if len(hrefs) != 1 {
			t.Fatalf("%s links the compensations %v, want once", from, hrefs)
		}
		u, _ := url.Parse(hrefs[0])
		to := b.do("GET", u.RequestURI(), nil)
		if to.status != http.StatusOK || u.Fragment != anchor("w-old") || to.doc.Find("tr#"+u.Fragment).Length() != 1 {
			t.Errorf("%s links %s: %d", from, hrefs[0], to.status)
		}
	}
	if key := b.do("GET", keyPath(e, "k-w-old"), nil); !strings.Contains(key.doc.Find("dl.fields").Text(), "watching: "+evil) {
		t.Error("the key page does not show its order's compensation")
	}

	// The overview counts them.
	home := b.do("GET", "/admin", nil)
	for href, want := range map[string]string{"/admin/compensations?state=watching": "2 compensations watching",
		"/admin/compensations?state=refunded": "1 compensations refunded"} {
		if got := home.doc.Find(`ul.stats a[href="` + href + `"]`).Text(); !strings.Contains(got, want) {
			t.Errorf("overview %s: %q", href, got)
		}
	}

	for _, q := range []string{"?state=maybe", "?client=x", "?order=ord_nope", "?after=!!", "?after=1_2_eA"} {
		bad := b.do("GET", "/admin/compensations"+q, nil)
		if bad.status != http.StatusBadRequest || strings.TrimSpace(bad.doc.Find("[role=alert]").Text()) == "" {
			t.Errorf("compensations%s: %d, alert %q", q, bad.status, bad.doc.Find("[role=alert]").Text())
		}
	}
	if out := newBrowser(t, e).do("GET", "/admin/compensations", nil); out.status != http.StatusSeeOther ||
		!strings.HasPrefix(out.header.Get("Location"), "/admin/login?next=") {
		t.Errorf("signed out: %d %q", out.status, out.header.Get("Location"))
	}
}

// A compensation for a charge that names no order of tekrar's (an orphan charge found by
// reconciliation) is listed, saying it has no order.
func TestCompensationOfAnOrphanCharge(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	// An orphan charge belongs to no order and so to no client (see 00018_reconciliation.sql).
	if _, err := e.DB.Exec(`
		INSERT INTO compensations (client_id, order_id, source, charge_key, reason, next_attempt_at, watch_until, created_at)
		VALUES (NULL, NULL, 'reconcile', 'pk-orphan', 'a charge of no order', now(), now() + interval '1 day', now())`); err != nil {
		t.Fatal(err)
	}
	p := b.do("GET", "/admin/compensations", nil)
	row := p.doc.Find("table.compensations tbody tr")
	if p.status != http.StatusOK || row.Length() != 1 || !strings.Contains(row.Text(), "no order (orphan charge)") {
		t.Errorf("%d: %s", p.status, p.body)
	}
}
