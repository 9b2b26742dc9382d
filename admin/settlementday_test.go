package admin_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/internal/apptest"
)

// settleDayEnv is a client in Europe/Istanbul with a settled day D of captures on both
// edges of its midnight, a refund and a dispute; an adjustment of D-1 that D counted; and a
// refund of D recorded after D was settled, which D+1 counted.
type settleDayEnv struct {
	e          *apptest.Env
	b          *browser
	day        calendar.Day
	start, end time.Time
	a, bo, c   string // orders: A captured at 23:59:59.5 of D, B at 00:00:00 of D, C at 23:59:59 of D-1
	path       string // D's page
}

func newSettleDayEnv(t *testing.T) settleDayEnv {
	t.Helper()
	e := apptest.New(t)
	if _, err := e.DB.Exec(`UPDATE clients SET time_zone = 'Europe/Istanbul' WHERE id = $1`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation("Europe/Istanbul")
	s := settleDayEnv{e: e, b: actSignIn(t, e, "viewer@example.com", admin.RoleViewer)}
	// The operator is in New York: the day's movements are written in the client's zone all
	// the same, where the day is a day.
	s.b.setZone("America/New_York")
	// A day before the client was made, which the scheduled settlement never settles.
	s.day = calendar.Of(time.Now(), loc).AddDays(-3)
	s.start, s.end = s.day.Window(loc)
	s.a, s.bo, s.c = actOrder(t, e, "k-day-a", 4500), actOrder(t, e, "k-day-b", 3000), actOrder(t, e, "k-day-c", 2000)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := e.DB.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	paidAt := func(order string, at time.Time) {
		exec(`UPDATE payments SET created_at = $2 WHERE order_id = (SELECT id FROM orders WHERE public_id = $1)`, order, at)
	}
	refund := func(order string, amount int64, at time.Time) {
		exec(`INSERT INTO refunds (order_id, client_id, amount, currency, status, provider_key, created_at, updated_at)
			SELECT id, client_id, $2, currency, 'succeeded', 'rk-' || md5(random()::text), $3, $3 FROM orders WHERE public_id = $1`,
			order, amount, at)
	}
	paidAt(s.a, s.end.Add(-500*time.Millisecond))
	paidAt(s.bo, s.start)
	paidAt(s.c, s.start.Add(-time.Second))
	refund(s.a, 1500, s.start.Add(10*time.Hour))
	exec(`INSERT INTO order_disputes (order_id, provider, dispute_id, amount, reason, status, opened_at)
		SELECT id, 'psp', 'dp_day', 3000, 'fraudulent', 'open', $2 FROM orders WHERE public_id = $1`, s.bo, s.start.Add(12*time.Hour))

	ctx := context.Background()
	st := settlement.New(e.DB, settlement.Config{Now: func() time.Time { return s.end.Add(72 * time.Hour) }}, nil)
	settle := func(d calendar.Day) {
		t.Helper()
		if _, err := st.Settle(ctx, e.ClientID, d); err != nil {
			t.Fatal(err)
		}
	}
	settle(s.day.AddDays(-1)) // C's capture
	// Recorded after D-1 was settled: D counts it as an adjustment of D-1.
	refund(s.c, 500, s.start.Add(-time.Hour))
	settle(s.day)
	// Recorded after D was settled: D+1 counts it as an adjustment of D.
	refund(s.a, 700, s.start.Add(20*time.Hour))
	settle(s.day.AddDays(1))
	s.path = "/admin/settlements/" + strconv.FormatInt(e.ClientID, 10) + "/" + s.day.String()
	return s
}

// A settled day's page lists every movement under the total it adds to, with its time in
// the client's zone, not the operator's (Istanbul, to an operator in New York: a capture at 23:59:59 of the day and one at its
// 00:00:00, never the one at 23:59:59 of the day before), its amount and its order; each
// total's sum agrees with the stored one; the adjustment it counted names the day it belongs
// to, and the movement of the day recorded after it was settled names the settlement that
// counted it; the orders of the day show the day's movements beside their status now; the
// CSV export has exactly those rows, times in UTC.
func TestSettledDayListsEveryMovement(t *testing.T) {
	s := newSettleDayEnv(t)
	d, prev, next := s.day.String(), s.day.AddDays(-1).String(), s.day.AddDays(1).String()
	p := s.b.do("GET", s.path, nil)
	if p.status != http.StatusOK {
		t.Fatalf("%s: %d\n%.500s", s.path, p.status, p.body)
	}
	if p.doc.Find("#mismatch").Length() != 0 {
		t.Errorf("the page says the totals disagree: %s", p.doc.Find("#mismatch").Text())
	}
	text := func(sel *goquery.Selection) string { return strings.Join(strings.Fields(sel.Text()), " ") }
	if how := text(p.doc.Find("#how")); !strings.Contains(how, "Europe/Istanbul: from "+d+" 00:00:00 to "+next+" 00:00:00 there (24 hours)") ||
		!strings.Contains(how, "Net is captured minus refunded, disputed and compensated") {
		t.Errorf("how the totals were computed: %s", how)
	}
	if net := text(p.doc.Find("table.settlement-totals tbody tr td").Last()); net != "30.00 TRY" {
		t.Errorf("net %q, want 75.00 - 15.00 - 30.00 - 0 = 30.00 TRY", net)
	}
	// rows lists a table's rows as "when | what | amount | order | ...".
	rows := func(sel *goquery.Selection) []string {
		var out []string
		sel.Find("tbody tr").Each(func(_ int, tr *goquery.Selection) {
			var cells []string
			tr.Find("td").Each(func(_ int, td *goquery.Selection) {
				if lis := td.Find("li"); lis.Length() > 0 { // one movement per item
					cells = append(cells, strings.Join(lis.Map(func(_ int, li *goquery.Selection) string { return text(li) }), "; "))
					return
				}
				cells = append(cells, text(td))
			})
			out = append(out, strings.Join(cells, " | "))
		})
		return out
	}
	groups := []struct {
		id, sum string
		rows    []string
	}{
		{"captured-try", "Stored 75.00 TRY (2 movements); its movements add up to 75.00 TRY (2 movements): they agree.", []string{
			d + " 00:00:00 Europe/Istanbul | capture | 30.00 TRY | " + s.bo + " | paid",
			d + " 23:59:59 Europe/Istanbul | capture | 45.00 TRY | " + s.a + " | paid",
		}},
		{"refunded-try", "Stored 15.00 TRY (1 movement); its movements add up to 15.00 TRY (1 movement): they agree.", []string{
			d + " 10:00:00 Europe/Istanbul | refund | 15.00 TRY | " + s.a + " | paid",
		}},
		{"disputed-try", "Stored 30.00 TRY (1 movement); its movements add up to 30.00 TRY (1 movement): they agree.", []string{
			d + " 12:00:00 Europe/Istanbul | dispute | 30.00 TRY | " + s.bo + " | paid",
		}},
	}
	if n := p.doc.Find("section.movement-group").Length(); n != len(groups) {
		t.Errorf("%d totals with movements, want %d", n, len(groups))
	}
	for _, g := range groups {
		sec := p.doc.Find("section#" + g.id)
		if got := text(sec.Find("p.sum")); got != g.sum {
			t.Errorf("%s: %q, want %q", g.id, got, g.sum)
		}
		if got := rows(sec); strings.Join(got, "\n") != strings.Join(g.rows, "\n") {
			t.Errorf("%s lists\n%s\nwant\n%s", g.id, strings.Join(got, "\n"), strings.Join(g.rows, "\n"))
		}
	}
	adj := rows(p.doc.Find("#adjustments ~ table").First())
	if want := prev + " 23:00:00 Europe/Istanbul | refund | 5.00 TRY | " + s.c + " | paid | " + prev; len(adj) != 1 || adj[0] != want {
		t.Errorf("adjustments: %q, want %q", adj, want)
	}
	late := rows(p.doc.Find("#late ~ table").First())
	if want := d + " 20:00:00 Europe/Istanbul | refund | 7.00 TRY | " + s.a + " | paid | settlement of " + next; len(late) != 1 || late[0] != want {
		t.Errorf("what came late: %q, want %q", late, want)
	}
	for _, link := range []string{"/admin/settlements/" + strconv.FormatInt(s.e.ClientID, 10) + "/" + prev,
		"/admin/settlements/" + strconv.FormatInt(s.e.ClientID, 10) + "/" + next, "/admin/orders/" + s.c} {
		if p.doc.Find(`a[href="`+link+`"]`).Length() == 0 {
			t.Errorf("the page does not link %s", link)
		}
	}
	orders := rows(p.doc.Find("table.day-orders"))
	wantOrders := []string{
		s.bo + " | capture 30.00 TRY at " + d + " 00:00:00 Europe/Istanbul; dispute 30.00 TRY at " + d + " 12:00:00 Europe/Istanbul | paid",
		s.a + " | refund 15.00 TRY at " + d + " 10:00:00 Europe/Istanbul; refund 7.00 TRY at " + d + " 20:00:00 Europe/Istanbul; capture 45.00 TRY at " + d + " 23:59:59 Europe/Istanbul | paid",
	}
	if strings.Join(orders, "\n") != strings.Join(wantOrders, "\n") {
		t.Errorf("orders of the day:\n%s\nwant\n%s", strings.Join(orders, "\n"), strings.Join(wantOrders, "\n"))
	}
	if strings.Contains(text(p.doc.Find("table.day-orders")), s.c) {
		t.Error("the order captured the day before is among the orders of the day")
	}

	// The export: the same movements, in the page's order.
	href, _ := p.doc.Find("a#export-movements").Attr("href")
	x := s.b.do("GET", href, nil)
	if x.status != http.StatusOK || !strings.HasPrefix(x.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(x.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("%s: %d %v", href, x.status, x.header)
	}
	got, err := csv.NewReader(strings.NewReader(x.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// Times are RFC 3339 in UTC, as in every export.
	utc := func(s string) string {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return at.UTC().Format(time.RFC3339Nano)
	}
	want := [][]string{
		{"part", "total", "kind", "day", "occurred_at_utc", "amount", "currency", "order", "order_status_now", "counted_on"},
		{"own", "captured", "capture", d, utc(d + "T00:00:00+03:00"), "3000", "TRY", s.bo, "paid", d},
		{"own", "captured", "capture", d, utc(d + "T23:59:59.5+03:00"), "4500", "TRY", s.a, "paid", d},
		{"own", "refunded", "refund", d, utc(d + "T10:00:00+03:00"), "1500", "TRY", s.a, "paid", d},
		{"own", "disputed", "dispute", d, utc(d + "T12:00:00+03:00"), "3000", "TRY", s.bo, "paid", d},
		{"adjustment", "refunded", "refund", prev, utc(prev + "T23:00:00+03:00"), "500", "TRY", s.c, "paid", d},
		{"late", "refunded", "refund", d, utc(d + "T20:00:00+03:00"), "700", "TRY", s.a, "paid", next},
	}
	if len(got) != len(want) {
		t.Fatalf("the export has %d lines, want %d:\n%v", len(got), len(want), got)
	}
	for i, r := range got {
		// source_id and settlement_id are the database's: left out of the comparison.
		r = append(r[:3:3], r[4:11]...)
		if strings.Join(r, ",") != strings.Join(want[i], ",") {
			t.Errorf("export line %d: %v, want %v", i, r, want[i])
		}
	}
}

// A stored total its movements do not add up to is said loudly, naming the total and both
// figures; a day that is not settled, or an address that is none, is the 404 page.
func TestSettledDaySaysWhenItsTotalsDisagree(t *testing.T) {
	s := newSettleDayEnv(t)
	if _, err := s.e.DB.Exec(`
		UPDATE settlement_totals SET captured_amount = captured_amount + 100
		 WHERE settlement_id = (SELECT id FROM settlements WHERE client_id = $1 AND day = $2)`, s.e.ClientID, s.day.String()); err != nil {
		t.Fatal(err)
	}
	p := s.b.do("GET", s.path, nil)
	want := "Captured in TRY: stored 76.00 TRY (2 movements), but its movements add up to 75.00 TRY (2 movements)."
	if p.status != http.StatusOK || !strings.Contains(p.doc.Find("#mismatch[role=alert]").Text(), want) {
		t.Errorf("%s: %d, without the alert %q", s.path, p.status, want)
	}
	if got := p.doc.Find("section#captured-try p.sum[role=alert]").Length(); got != 1 {
		t.Errorf("the captured total is not marked as disagreeing")
	}
	if p.doc.Find("section#refunded-try p.sum[role=alert]").Length() != 0 {
		t.Errorf("the refunded total, which agrees, is marked as disagreeing")
	}
	client := strconv.FormatInt(s.e.ClientID, 10)
	for _, path := range []string{"/admin/settlements/" + client + "/" + s.day.AddDays(2).String(),
		"/admin/settlements/" + client + "/2026-02-30", "/admin/settlements/999999/" + s.day.String(),
		"/admin/settlements/" + client + "/" + s.day.AddDays(2).String() + "/movements.csv"} {
		if p := s.b.do("GET", path, nil); p.status != http.StatusNotFound || p.doc.Find(".error-page").Length() != 1 {
			t.Errorf("%s: %d, want the 404 page", path, p.status)
		}
	}
}
