package metrics_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/schedule"
)

// has reports whether family name has a series whose labels include want.
func has(fams map[string]*dto.MetricFamily, name string, want ...string) bool {
	if f := fams[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, want) {
				return true
			}
		}
	}
	return false
}

// runNow runs the app's task name once through its scheduler and checks its outcome.
func runNow(t *testing.T, e *apptest.Env, name, outcome string) {
	t.Helper()
	r, err := e.App.Scheduler.RunNow(context.Background(), name)
	if r.Outcome.String != outcome || (err != nil) != (outcome == schedule.OutcomeFailed) {
		t.Fatalf("run %s: %+v %v, want %s", name, r, err, outcome)
	}
}

// TestScheduledRunsCounted runs the app's tasks through its scheduler and checks that each
// finished run counts once under its task and outcome: an ok run, a run skipped because
// another session held the task's lock, a run that failed on a client whose zone is not a
// zone. The last success and an unfinished run are read from schedule_runs at scrape time.
func TestScheduledRunsCounted(t *testing.T) {
	e := apptest.New(t)
	runs := func(fams map[string]*dto.MetricFamily, task, outcome string) float64 {
		return value(fams, "tekrar_scheduled_runs_total", "task", task, "outcome", outcome)
	}
	_, fams := scrape(t, e)
	for _, task := range []string{"sweep", "installments", "settle"} {
		for _, o := range []string{"ok", "failed", "skipped"} {
			if !has(fams, "tekrar_scheduled_runs_total", "task", task, "outcome", o) || runs(fams, task, o) != 0 {
				t.Errorf("before any run: tekrar_scheduled_runs_total{task=%s,outcome=%s} missing or not 0", task, o)
			}
		}
		if !has(fams, "tekrar_scheduled_last_success_timestamp_seconds", "task", task) ||
			value(fams, "tekrar_scheduled_last_success_timestamp_seconds", "task", task) != 0 {
			t.Errorf("before any run: last success of %s missing or not 0", task)
		}
	}

	runNow(t, e, "sweep", schedule.OutcomeOK)
	_, fams = scrape(t, e)
	if got := runs(fams, "sweep", "ok"); got != 1 {
		t.Errorf("sweep ok after one run = %v, want 1", got)
	}
	if got := value(fams, "tekrar_scheduled_run_duration_seconds", "task", "sweep"); got != 1 {
		t.Errorf("sweep durations observed = %v, want 1", got)
	}
	var finished float64
	if err := e.DB.Get(&finished, `SELECT EXTRACT(EPOCH FROM finished_at)::float8 FROM schedule_runs WHERE task = 'sweep' AND outcome = 'ok'`); err != nil {
		t.Fatal(err)
	}
	if got := value(fams, "tekrar_scheduled_last_success_timestamp_seconds", "task", "sweep"); math.Abs(got-finished) > 1e-3 {
		t.Errorf("sweep last success = %v, want its run's end %v", got, finished)
	}

	// Another session holds the sweep's lock, as a run in another process would.
	ctx := context.Background()
	other, err := e.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, `SELECT pg_advisory_lock(x'73636864'::int, hashtext('sweep'))`); err != nil {
		t.Fatal(err)
	}
	runNow(t, e, "sweep", schedule.OutcomeSkipped)
	if _, err := other.ExecContext(ctx, `SELECT pg_advisory_unlock(x'73636864'::int, hashtext('sweep'))`); err != nil {
		t.Fatal(err)
	}

	// A client whose zone is not a zone: settlement fails for it, and the run fails.
	_, bad := e.NewClient(t, "zoneless")
	e.DB.MustExec(`UPDATE clients SET time_zone = 'Nowhere/Atlantis' WHERE id = $1`, bad)
	runNow(t, e, "settle", schedule.OutcomeFailed)

	// A run whose process died: its record stays unfinished, the newest of its task.
	e.DB.MustExec(`INSERT INTO schedule_runs (task, scheduled_for, trigger, attempt, process, started_at)
	               VALUES ('installments', now(), 'hand', 1, 'gone:1', now() - interval '2 hours')`)

	_, fams = scrape(t, e)
	want := map[[2]string]float64{{"sweep", "ok"}: 1, {"sweep", "skipped"}: 1, {"sweep", "failed"}: 0,
		{"settle", "failed"}: 1, {"settle", "ok"}: 0, {"installments", "ok"}: 0}
	for k, n := range want {
		if got := runs(fams, k[0], k[1]); got != n {
			t.Errorf("tekrar_scheduled_runs_total{task=%s,outcome=%s} = %v, want %v", k[0], k[1], got, n)
		}
	}
	if got := value(fams, "tekrar_scheduled_run_duration_seconds", "task", "sweep"); got != 1 {
		t.Errorf("sweep durations observed = %v, want 1 (a skipped run did nothing)", got)
	}
	if got := value(fams, "tekrar_settlement_client_failures_total"); got != 1 {
		t.Errorf("tekrar_settlement_client_failures_total = %v, want 1", got)
	}
	if got := value(fams, "tekrar_scheduled_last_success_timestamp_seconds", "task", "settle"); got != 0 {
		t.Errorf("settle last success = %v, want 0 (it only failed)", got)
	}
	if got := value(fams, "tekrar_scheduled_unfinished_run_seconds", "task", "installments"); got < 2*3600 {
		t.Errorf("installments unfinished = %v, want at least 2h", got)
	}
	if got := value(fams, "tekrar_scheduled_unfinished_run_seconds", "task", "sweep"); got != 0 {
		t.Errorf("sweep unfinished = %v, want 0", got)
	}
	if got := value(fams, "tekrar_backlog_up"); got != 1 {
		t.Errorf("tekrar_backlog_up = %v", got)
	}
}

// TestMoneyWorkCounted: installments charged and declined by a scheduled run, and the
// settlement of the days after, counted as the rows they wrote; a second run that finds
// nothing to do counts nothing more.
func TestMoneyWorkCounted(t *testing.T) {
	e := apptest.New(t)
	ctx := context.Background()
	sb := psp.NewSandbox(e.DB, psp.SandboxOptions{})
	var declining string
	for i, customer := range []string{"cus_pays", "cus_declines"} {
		pm, err := sb.SavePaymentMethod(ctx, e.ProviderCustomer(t, e.ClientID, customer), psp.TokenVisa)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"currency":"TRY","amount":900,"installments":3,
			"items":[{"sku":"SOFA","name":"Sofa","quantity":1,"unit_amount":900}],
			"payment":{"customer":%q,"payment_method":%q}}`, customer, pm.ID)
		if r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(body), "Idempotency-Key", fmt.Sprint("plan-", i)); r.Status != http.StatusCreated {
			t.Fatalf("order: %d %s", r.Status, r.Body)
		}
		declining = pm.ID
	}
	// The second customer's card declines from now on.
	if err := sb.ReplacePaymentMethodCard(ctx, declining, psp.TokenDeclined); err != nil {
		t.Fatal(err)
	}

	// A month and a day later the second installments are due.
	e.Clock.Advance(32 * 24 * time.Hour)
	for range 2 {
		runNow(t, e, "installments", schedule.OutcomeOK)
	}
	_, fams := scrape(t, e)
	want := map[string]float64{"charged": 1, "retry": 1, "attention": 0, "unknown": 0, "fenced": 0}
	for r, n := range want {
		if got := value(fams, "tekrar_installments_total", "result", r); got != n {
			t.Errorf("tekrar_installments_total{result=%s} = %v, want %v", r, got, n)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM installments WHERE n = 2 AND status = 'paid'`); n != 1 {
		t.Errorf("%d second installments paid, want 1", n)
	}
	if got := value(fams, "tekrar_scheduled_runs_total", "task", "installments", "outcome", "ok"); got != 2 {
		t.Errorf("installments runs ok = %v, want 2", got)
	}

	for range 2 {
		runNow(t, e, "settle", schedule.OutcomeOK)
	}
	_, fams = scrape(t, e)
	days := count(t, e, `SELECT count(*) FROM settlements`)
	if days < 30 {
		t.Fatalf("%d days settled, want a month's", days)
	}
	for _, c := range []struct {
		name string
		want int
	}{
		{"tekrar_settlement_days_total", days},
		{"tekrar_settlement_items_total", count(t, e, `SELECT count(*) FROM settlement_items WHERE NOT adjusted`)},
		{"tekrar_settlement_adjustments_total", count(t, e, `SELECT count(*) FROM settlement_items WHERE adjusted`)},
		{"tekrar_settlement_client_failures_total", 0},
	} {
		if got := value(fams, c.name); got != float64(c.want) {
			t.Errorf("%s = %v, want %d", c.name, got, c.want)
		}
	}
	if got := value(fams, "tekrar_settlement_items_total"); got == 0 {
		t.Error("tekrar_settlement_items_total = 0 after a month of charges")
	}
}

// count runs a query that returns one integer.
func count(t testing.TB, e *apptest.Env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.DB.Get(&n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
