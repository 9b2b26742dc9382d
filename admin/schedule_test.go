package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

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
	for _, want := range []string{"tombstoned 0 keys", "hand", "unfinished", "gone:1", "failed", "attempt 2",
		"&lt;script&gt;alert(1)&lt;/script&gt;", `aria-current="page">Schedule`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the schedule page lacks %q", want)
		}
	}
	if strings.Contains(p.body, "<script>alert") || strings.Contains(p.body, "<b>half") {
		t.Error("the page shows a run's text unescaped")
	}
}
