package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The inbox page counts refused deliveries by reason over the last hour and 24 hours, says
// when and from where the last one came (as text, never markup), and raises a notice when a
// signature check failed in the last hour.
func TestInboxPageRefusals(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	quiet := b.do("GET", "/admin/inbox", nil)
	if quiet.status != http.StatusOK {
		t.Fatalf("inbox: %d %s", quiet.status, quiet.body)
	}
	if quiet.doc.Find("p.warning.refused").Length() != 0 || quiet.doc.Find("table.refusals").Length() != 0 {
		t.Error("a notice or counts without any refusal")
	}
	if _, err := e.DB.Exec(`
		INSERT INTO provider_inbox_refusals (bucket, reason, count, last_at, last_remote) VALUES
		  (date_trunc('minute', now() - interval '2 minutes', 'UTC'), 'bad_signature', 5, now() - interval '2 minutes', '<b>203.0.113.9</b>'),
		  (date_trunc('minute', now() - interval '3 hours', 'UTC'), 'bad_signature', 7, now() - interval '3 hours', '10.0.0.1'),
		  (date_trunc('minute', now() - interval '5 hours', 'UTC'), 'stale', 2, now() - interval '5 hours', '10.0.0.2'),
		  (date_trunc('minute', now() - interval '30 hours', 'UTC'), 'future', 9, now() - interval '30 hours', '10.0.0.3')`); err != nil {
		t.Fatal(err)
	}
	p := b.do("GET", "/admin/inbox", nil)
	if p.status != http.StatusOK {
		t.Fatalf("inbox: %d %s", p.status, p.body)
	}
	var rows []string
	p.doc.Find("table.refusals tbody tr").Each(func(_ int, tr *goquery.Selection) {
		td := tr.Find("td")
		rows = append(rows, td.Eq(0).Text()+" "+td.Eq(2).Text()+" "+td.Eq(3).Text())
	})
	if got, want := strings.Join(rows, ", "), "bad_signature 5 12, stale 0 2"; got != want {
		t.Errorf("refusals %q, want %q", got, want)
	}
	if p.doc.Find("p.warning.refused").Length() != 1 {
		t.Error("no notice of the refusals of the last hour")
	}
	if got := p.doc.Find("p.last-refusal code.remote").Text(); got != "<b>203.0.113.9</b>" {
		t.Errorf("last refusal from %q", got)
	}
	if strings.Contains(p.body, "<b>203.0.113.9</b>") {
		t.Error("the remote address was rendered as markup")
	}
	// Only older refusals: counted, but no notice.
	if _, err := e.DB.Exec(`DELETE FROM provider_inbox_refusals WHERE last_at > now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	old := b.do("GET", "/admin/inbox", nil)
	if old.doc.Find("p.warning.refused").Length() != 0 || old.doc.Find("table.refusals tbody tr").Length() != 2 {
		t.Errorf("older refusals: notice %d, rows %d", old.doc.Find("p.warning.refused").Length(), old.doc.Find("table.refusals tbody tr").Length())
	}
}
