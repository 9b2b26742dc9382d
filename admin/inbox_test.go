package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The inbox page shows the provider's events as tekrar recorded them, with the duplicates it
// absorbed and the events that arrived late; a charge's link narrows it to that charge. What
// the provider sent is shown as text, never as markup.
func TestInboxPage(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	if _, err := e.DB.Exec(`
		INSERT INTO provider_events (provider, event_id, type, charge_id, sequence, body, outcome, received_at, deliveries, last_delivery_at)
		VALUES ('psp', 'evt_a1', 'charge.succeeded', 'ch_a', 1, '{}', 'applied', now() - interval '3 minutes', 3, now()),
		       ('psp', 'evt_a3', 'charge.refunded', 'ch_a', 3, '{}', 'applied', now() - interval '2 minutes', 1, now()),
		       ('psp', 'evt_a2', 'refund.succeeded', 'ch_a', 2, '{}', 'stale', now() - interval '1 minute', 1, now()),
		       ('psp', 'evt_b1', 'charge.succeeded', 'ch_b', 1, '{}', 'applied', now(), 1, now()),
		       ('psp', 'evt_x', '<script>alert(1)</script>', NULL, NULL, '{}', 'ignored', now(), 1, now())`); err != nil {
		t.Fatal(err)
	}
	p := b.do("GET", "/admin/inbox", nil)
	if p.status != http.StatusOK {
		t.Fatalf("inbox: %d %s", p.status, p.body)
	}
	var pairs []string
	p.doc.Find("dl.counts dt").Each(func(_ int, dt *goquery.Selection) {
		pairs = append(pairs, dt.Text()+" "+dt.Next().Text())
	})
	counts := strings.Join(pairs, ", ")
	for _, want := range []string{"Events 5", "Applied 3", "Stale (arrived late) 1", "Ignored (unknown type) 1", "Duplicates absorbed 2"} {
		if !strings.Contains(counts, want) {
			t.Errorf("counts %q lack %q", counts, want)
		}
	}
	if n := p.doc.Find("table.inbox tbody tr").Length(); n != 5 {
		t.Errorf("%d rows, want 5", n)
	}
	if strings.Contains(p.body, "<script>alert(1)</script>") {
		t.Error("an event type was rendered as markup")
	}
	one := b.do("GET", "/admin/inbox?charge=ch_a", nil)
	if n := one.doc.Find("table.inbox tbody tr").Length(); n != 3 {
		t.Errorf("charge ch_a: %d rows, want 3", n)
	}
	if !strings.Contains(one.body, "evt_a2") || strings.Contains(one.body, "evt_b1") {
		t.Error("the charge's page lists another charge's events, or not its own")
	}
}
