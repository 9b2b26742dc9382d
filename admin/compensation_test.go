package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The order page shows the refund tekrar owed for a charge it gave up on, as the compensation
// worker left it: still watching, or refunded with the refund's id and amount.
func TestOrderPageShowsItsCompensation(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	id := actOrder(t, e, "k-comp", 4500)
	page := "/admin/orders/" + id
	// The heading, not the console's navigation, which names the compensations list.
	const section = "<h2>Compensation</h2>"
	if p := b.do("GET", page, nil); p.status != http.StatusOK || strings.Contains(p.body, section) {
		t.Fatalf("an order without a compensation: %d, shows one: %v", p.status, strings.Contains(p.body, section))
	}
	if _, err := e.DB.Exec(`
		INSERT INTO compensations (client_id, order_id, charge_key, reason, next_attempt_at, watch_until, created_at)
		SELECT client_id, id, 'pk-comp', 'completer gave up on a charge whose worker was gone', now(), now() + interval '1 day', now()
		  FROM orders WHERE public_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	p := b.do("GET", page, nil)
	for _, want := range []string{section, "watching", "completer gave up on a charge whose worker was gone"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if _, err := e.DB.Exec(`
		UPDATE compensations SET state = 'refunded', charge_id = 'ch_late', refund_id = 're_back', amount = 4500,
		       currency = 'TRY', settled_at = now()`); err != nil {
		t.Fatal(err)
	}
	p = b.do("GET", page, nil)
	for _, want := range []string{"tekrar refunded what the provider had not already refunded of it", "ch_late", "re_back (45.00 TRY)"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if _, err := e.DB.Exec(`
		UPDATE compensations SET state = 'already_refunded', refund_id = NULL, amount = NULL, currency = NULL`); err != nil {
		t.Fatal(err)
	}
	p = b.do("GET", page, nil)
	for _, want := range []string{"the provider had already refunded all of it; nothing was owed", "ch_late"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(p.body, "re_back") {
		t.Error("the page names a refund tekrar did not make")
	}
}

// A disputed order's page names the dispute and offers no refund, saying why.
func TestOrderPageShowsItsDispute(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	id := actOrder(t, e, "k-disp", 4500)
	if _, err := e.DB.Exec(`
		WITH o AS (UPDATE orders SET status = 'disputed' WHERE public_id = $1 RETURNING id)
		INSERT INTO order_disputes (order_id, provider, dispute_id, amount, reason, status, opened_at)
		SELECT id, 'psp', 'dp_shown', 4500, 'product not received', 'open', now() FROM o`, id); err != nil {
		t.Fatal(err)
	}
	p := b.do("GET", "/admin/orders/"+id, nil)
	for _, want := range []string{"dp_shown", "product not received", "cannot be refunded until it is decided", "disputes this charge"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if p.doc.Find(`a[href="/admin/orders/`+id+`/refund"]`).Length() != 0 {
		t.Error("a disputed order offers a refund")
	}
}
