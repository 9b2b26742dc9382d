package admin_test

import (
	"strings"
	"testing"
	"time"

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
	e.App.Service.FlushHistory()
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

// Expired keys can be listed: the key list's state "expired" shows the keys the sweeper
// removed (a retry with one is refused until its tombstone is forgotten). Before, no
// filter reached them.
func TestExpiredKeysAreListed(t *testing.T) {
	e := apptest.New(t)
	actOrder(t, e, "k-old", 4500)
	e.Clock.Advance(48 * time.Hour)
	if _, err := e.App.Sweeper.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	actOrder(t, e, "k-new", 4500)
	tests := []struct {
		query string
		want  []string
	}{
		{"state=expired", []string{"k-old"}},
		{"state=expired&key=k-new", nil},
		{"state=expired&key=k-old", []string{"k-old"}},
	}
	for _, tt := range tests {
		p := b.do("GET", "/admin/keys?"+tt.query, nil)
		if p.status != 200 {
			t.Fatalf("%s: %d %s", tt.query, p.status, p.body)
		}
		var got []string
		p.doc.Find("#rows tbody tr td:first-child code").Each(func(_ int, s *goquery.Selection) { got = append(got, s.Text()) })
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: %v, want %v", tt.query, got, tt.want)
		}
	}
	if p := b.do("GET", "/admin/keys?state=expired", nil); p.doc.Find(`#rows a[href="`+keyPath(e, "k-old")+`"]`).Length() != 1 ||
		p.doc.Find(`select[name=state] option[value=expired][selected]`).Length() != 1 {
		t.Error("the swept key is not linked to its page, or the form lost the state")
	}
}
