package admin_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// A compensation held because its charge's dispute is open (an orphan charge no order owns)
// is shown where compensations are: among those not settled, under its own filter and count,
// with the dispute that holds it; the overview counts it as an alert.
func TestCompensationsListShowsHeldDisputes(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	var id int64
	if err := e.DB.Get(&id, `
		INSERT INTO compensations (charge_key, reason, source, charge_id, state, attempts, last_error,
		                           next_attempt_at, watch_until, created_at)
		VALUES ('stray-1', 'reconciliation: the charge names no order of tekrar''s', 'reconcile', 'ch_disputed', 'disputed', 3,
		        'held: dispute dp_1 of 7000 is open; the refund waits for its decision',
		        now() + interval '10 minutes', now() + interval '1 day', now() - interval '1 hour')
		RETURNING id`); err != nil {
		t.Fatal(err)
	}
	anchor := "tr#compensation-" + strconv.FormatInt(id, 10)
	for _, q := range []string{"", "?state=disputed"} {
		p := b.do("GET", "/admin/compensations"+q, nil)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d %s", q, p.status, p.body)
		}
		row := strings.Join(strings.Fields(p.doc.Find(anchor).Text()), " ")
		if !strings.Contains(row, "disputed") || !strings.Contains(row, "dp_1") || !strings.Contains(row, "no order (orphan charge)") {
			t.Errorf("compensations%s: the held row reads %q", q, row)
		}
		if got := p.doc.Find("#count-disputed").Text(); got != "1" {
			t.Errorf("compensations%s: held count %q, want 1", q, got)
		}
	}
	if p := b.do("GET", "/admin/compensations?state=watching", nil); p.doc.Find(anchor).Length() != 0 {
		t.Error("the held compensation is listed as watching")
	}
	if p := b.do("GET", "/admin/", nil); !strings.Contains(p.body, "/admin/compensations?state=disputed") {
		t.Error("the overview does not link the held compensations")
	}
}
