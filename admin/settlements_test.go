package admin_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The settlements page lists a day's settlement with its totals and the link to its orders,
// and a late refund as an adjustment of the next day naming its own day; both CSV exports
// carry the same figures, with a client name that would be a spreadsheet formula defused
// and markup escaped on the page; a bad filter is a 400 that names the format.
func TestSettlementsPageAndExport(t *testing.T) {
	e := apptest.New(t)
	if _, err := e.DB.Exec(`UPDATE clients SET name = $2, time_zone = 'Europe/Istanbul' WHERE id = $1`, e.ClientID,
		`=HYPERLINK("x")<script>alert(1)</script>`); err != nil {
		t.Fatal(err)
	}
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	if p := b.do("GET", "/admin/settlements", nil); p.status != http.StatusOK || !strings.Contains(p.body, "No settlement yet") {
		t.Fatalf("settlements page before any: %d", p.status)
	}
	id := actOrder(t, e, "k-settle", 4500)
	ctx := context.Background()
	loc, _ := time.LoadLocation("Europe/Istanbul")
	day := calendar.Of(time.Now(), loc)
	_, end := day.Window(loc)
	s := settlement.New(e.DB, settlement.Config{Now: func() time.Time { return end.Add(48 * time.Hour) }}, nil)
	if _, err := s.Settle(ctx, e.ClientID, day); err != nil {
		t.Fatal(err)
	}
	// A refund recorded after the day was settled, dated inside it.
	if _, err := e.DB.Exec(`
		INSERT INTO refunds (order_id, client_id, amount, currency, status, provider_key, created_at, updated_at)
		SELECT id, client_id, 500, currency, 'succeeded', 'rk-late', $2, $2 FROM orders WHERE public_id = $1`,
		id, end.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, e.ClientID, day.AddDays(1)); err != nil {
		t.Fatal(err)
	}

	p := b.do("GET", "/admin/settlements", nil)
	if p.status != http.StatusOK {
		t.Fatalf("settlements page: %d", p.status)
	}
	for _, want := range []string{day.String(), day.AddDays(1).String(), "45.00 TRY (1)", "Europe/Istanbul", "refund", "5.00 TRY",
		"/admin/orders/" + id, "/admin/settlements.csv", "/admin/settlements/adjustments.csv"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the settlements page lacks %q", want)
		}
	}
	if strings.Contains(p.body, "<script>alert") {
		t.Error("the page shows the client's name unescaped")
	}
	orders := p.doc.Find(`a[href^="/admin/orders?client="]`).Last() // newest first: the day itself is last
	href, _ := orders.Attr("href")
	if q := b.do("GET", href, nil); q.status != http.StatusOK || !strings.Contains(q.body, id) {
		t.Errorf("the day's orders link %s: %d, without order %s", href, q.status, id)
	}

	rows := func(path string) [][]string {
		t.Helper()
		p := b.do("GET", path, nil)
		if p.status != http.StatusOK || !strings.HasPrefix(p.header.Get("Content-Type"), "text/csv") ||
			!strings.Contains(p.header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("%s: %d %v", path, p.status, p.header)
		}
		r, err := csv.NewReader(strings.NewReader(p.body)).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, p.body)
		}
		return r
	}
	set := rows("/admin/settlements.csv?client=" + strconv.FormatInt(e.ClientID, 10))
	if len(set) != 3 {
		t.Fatalf("settlements.csv has %d lines, want a header and two days:\n%v", len(set), set)
	}
	first := set[2] // newest first: the day after, then the day
	if first[0] != day.String() || first[6] != "TRY" || first[7] != "4500" || first[8] != "1" || first[9] != "0" {
		t.Errorf("the day's line: %v", first)
	}
	if !strings.HasPrefix(first[2], "'=") {
		t.Errorf("a client name starting with = is exported as %q, a formula", first[2])
	}
	if set[1][15] != "1" {
		t.Errorf("the next day's line counts %s adjustments, want 1: %v", set[1][15], set[1])
	}
	adj := rows("/admin/settlements/adjustments.csv?from=" + day.AddDays(1).String())
	if len(adj) != 2 || adj[1][0] != day.AddDays(1).String() || adj[1][4] != day.String() || adj[1][5] != "refund" ||
		adj[1][8] != "500" || adj[1][10] != id {
		t.Fatalf("adjustments.csv: %v", adj)
	}
	if got := rows("/admin/settlements/adjustments.csv?to=" + day.String()); len(got) != 1 {
		t.Errorf("adjustments of settlements up to the day itself: %v, want the header only", got)
	}

	for _, bad := range []string{"?from=2027-02-29", "?to=03/10/2026", "?client=x", "?from=2026-03-11&to=2026-03-10"} {
		if p := b.do("GET", "/admin/settlements"+bad, nil); p.status != http.StatusBadRequest {
			t.Errorf("settlements%s: %d, want 400", bad, p.status)
		}
		if p := b.do("GET", "/admin/settlements.csv"+bad, nil); p.status != http.StatusBadRequest {
			t.Errorf("settlements.csv%s: %d, want 400", bad, p.status)
		}
	}
}
