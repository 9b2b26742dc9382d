package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The order page shows an order's installments, with what waits for an operator; text from
// the provider (a decline code) is escaped.
func TestOrderPageShowsItsInstallments(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	id := actOrder(t, e, "k-plan", 4500)
	page := "/admin/orders/" + id
	const section = "<h2>Installments</h2>"
	if p := b.do("GET", page, nil); p.status != http.StatusOK || strings.Contains(p.body, section) {
		t.Fatalf("an order paid at once: %d, shows installments: %v", p.status, strings.Contains(p.body, section))
	}
	if _, err := e.DB.Exec(`
		INSERT INTO installments (order_id, n, amount, due_on, due_at, status, attempts, next_attempt_at,
		                          provider_charge_id, decline_code, paid_at, updated_at)
		SELECT id, 1, 2250, DATE '2027-01-31', TIMESTAMPTZ '2027-01-30 21:00Z', 'paid', 1, CAST(NULL AS timestamptz), 'ch_first', CAST(NULL AS text), now(), now()
		  FROM orders WHERE public_id = $1
		UNION ALL
		SELECT id, 2, 2250, DATE '2027-02-28', TIMESTAMPTZ '2027-02-27 21:00Z', 'attention', 4, NULL, NULL, '<b>card_declined</b>', NULL, now()
		  FROM orders WHERE public_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	p := b.do("GET", page, nil)
	for _, want := range []string{section, "2027-02-28", "attention", "ch_first", "22.50 TRY", "&lt;b&gt;card_declined&lt;/b&gt;"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(p.body, "<b>card_declined") {
		t.Error("the decline code is not escaped")
	}
}
