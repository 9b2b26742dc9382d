package admin_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/internal/apptest"
)

// The schedule page lists the tasks this process runs with their last runs and the recent
// runs of every task: a run by hand, a run whose process died (unfinished), and a failed
// run whose text comes from outside (escaped).
func TestSchedulePageShowsRuns(t *testing.T) {
	e := apptest.New(t)
	if r, err := http.Get(e.URL + "/admin/schedule"); err != nil || r.Request.URL.Path != "/admin/login" {
		t.Fatalf("without signing in: %v %v", r.Request.URL, err)
	}
	b := actSignIn(t, e, "viewer@example.com", "viewer")
	p := b.do("GET", "/admin/schedule", nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, "No run yet") || !strings.Contains(p.body, "sweep") {
		t.Fatalf("schedule page before any run: %d %s", p.status, p.body)
	}
	if _, err := e.App.Scheduler.RunNow(context.Background(), "sweep"); err != nil {
		t.Fatal(err)
	}
	_, err := e.DB.Exec(`
		INSERT INTO schedule_runs (task, scheduled_for, trigger, job_id, attempt, process)
		VALUES ('reconcile', now(), 'schedule', 41, 1, 'gone:1');
		INSERT INTO schedule_runs (task, scheduled_for, trigger, job_id, attempt, process, finished_at, outcome, summary, error)
		VALUES ('reconcile', now(), 'schedule', 42, 2, 'host:2', now(), 'failed', '<b>half</b>', '<script>alert(1)</script>')`)
	if err != nil {
		t.Fatal(err)
	}
	p = b.do("GET", "/admin/schedule", nil)
	for _, want := range []string{"tombstoned 0 keys", "manual (command)", "unfinished", "gone:1", "failed", "attempt 2",
		"&lt;script&gt;alert(1)&lt;/script&gt;", `aria-current="page">Schedule`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the schedule page lacks %q", want)
		}
	}
	if strings.Contains(p.body, "<script>alert") || strings.Contains(p.body, "<b>half") {
		t.Error("the page shows a run's text unescaped")
	}
}

// A run of the installments by hand (`tekrar installments run` runs the task so) is recorded
// as the scheduled runs are and listed beside them on the Schedule page, as manual, with its
// time, its counts and its outcome as the database holds them.
func TestManualInstallmentRunOnSchedulePage(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", "viewer")
	planOrder(t, e, "k-manual", "cus_manual", 300000, 3)
	at := e.Clock.Now().AddDate(0, 1, 1)
	run, err := e.App.Scheduler.RunByHand(context.Background(), "installments", at)
	if err != nil {
		t.Fatal(err)
	}
	var row struct {
		Trigger string `db:"trigger"`
		Outcome string `db:"outcome"`
		Summary string `db:"summary"`
		For     string `db:"scheduled_for"`
	}
	if err := e.DB.Get(&row, `SELECT trigger, outcome, summary, to_char(scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') AS scheduled_for
		  FROM schedule_runs WHERE id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	if row.Trigger != "hand" || row.Outcome != "ok" || !strings.Contains(row.Summary, "1") {
		t.Fatalf("the run by hand is recorded as %+v", row)
	}
	p := b.do("GET", "/admin/schedule", nil)
	var found bool
	p.doc.Find("table.runs tbody tr").Each(func(_ int, tr *goquery.Selection) {
		if strings.TrimSpace(tr.Find("td").Eq(0).Text()) != strconv.FormatInt(run.ID, 10) {
			return
		}
		found = true
		text := tr.Text()
		for _, want := range []string{"installments", "manual (command)", row.Outcome, row.Summary, row.For} {
			if !strings.Contains(text, want) {
				t.Errorf("the run's row lacks %q: %s", want, text)
			}
		}
	})
	if !found {
		t.Errorf("the Schedule page does not list run %d", run.ID)
	}
}
