package admin_test

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The key page: amounts in major units (it said "5500 TRY" for 55.00 TRY), the proof (the
// timeline) before the actions (it opened with "Force expire…"), and a viewer told whom
// to ask instead of nothing.
func TestKeyPageShowsTheProofFirst(t *testing.T) {
	e := apptest.New(t)
	adm := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	viewer := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	actOrder(t, e, "k-mocha", 5500)
	e.App.Service.FlushEvents()
	tests := []struct {
		name   string
		b      *browser
		action string // in the actions section
	}{
		{"an admin", adm, "Force expire…"},
		{"a viewer", viewer, "ask one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.b.do("GET", keyPath(e, "k-mocha"), nil)
			if p.status != 200 {
				t.Fatalf("key page: %d", p.status)
			}
			var amount string
			p.doc.Find("dl.fields dt").Each(func(_ int, dt *goquery.Selection) {
				if dt.Text() == "Amount" {
					amount = dt.Next().Text()
				}
			})
			if amount != "55.00 TRY (refunded 0.00 TRY)" {
				t.Errorf("amount %q, want 55.00 TRY (refunded 0.00 TRY)", amount)
			}
			html, _ := p.doc.Find("main").Html()
			timeline, actions := strings.Index(html, `id="timeline"`), strings.Index(html, `id="key-actions"`)
			if timeline < 0 || actions < 0 || timeline > actions {
				t.Errorf("timeline at %d, actions at %d: the proof must come first", timeline, actions)
			}
			if p.doc.Find("#timeline tbody tr").Length() == 0 {
				t.Error("the timeline is empty")
			}
			if got := p.doc.Find("#key-actions").Text(); !strings.Contains(got, tt.action) {
				t.Errorf("actions say %q, want %q", got, tt.action)
			}
		})
	}
}
