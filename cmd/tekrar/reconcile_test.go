package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestReconcileTwiceAtOnceAndKilledHalfWay: orphan charges at a `tekrar psp` (made there
// directly, under keys no order of tekrar's has). One `tekrar reconcile` dies right after
// it recorded its first compensation; a second dies right after the provider made its
// first refund, before tekrar recorded it; a third is SIGKILLed while it refunds; then two
// run at once to the end. Each orphan
// charge must be refunded exactly once at the provider, in full, with exactly one
// compensation (refunded) and one audit entry in tekrar, and show on the console's
// reconciliation page.
func TestReconcileTwiceAtOnceAndKilledHalfWay(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	ports := freePorts(t, 2)
	pspAddr := addrOf(ports[1])
	psp := startTekrar(t, childEnv("DATABASE_URL="+dbURL, "TEKRAR_PSP_ADDR="+pspAddr), nil, "psp")
	proctest.WaitUp(t, psp.Proc, "http://"+pspAddr, "/charges/none", 30*time.Second)

	const orphans = 10
	c := newHTTPClient()
	charges := map[string]int64{} // id -> amount
	for i := range orphans {
		amount := int64(1000 + i)
		r := mustSend(t, c, "POST", "http://"+pspAddr+"/charges", "",
			[]byte(fmt.Sprintf(`{"key":"stray-%d","amount":%d,"currency":"TRY","card_token":"tok_visa","description":"made at the provider by hand"}`, i, amount)))
		var ch struct{ ID, Status string }
		if r.Status != 200 || json.Unmarshal(r.Body, &ch) != nil || ch.Status != "succeeded" {
			t.Fatalf("charge %d: %d %s", i, r.Status, r.Body)
		}
		charges[ch.ID] = amount
	}

	reconcileEnv := func(extra ...string) []string {
		return childEnv(append([]string{"DATABASE_URL=" + dbURL, "TEKRAR_PSP_URL=http://" + pspAddr, "TEKRAR_LOG_LEVEL=warn"}, extra...)...)
	}
	crashAt := func(point string) {
		t.Helper()
		stdout, stderr, code := runTekrar(t, reconcileEnv("TEKRAR_CRASH_AT="+point), nil, "reconcile", "--since", "1h")
		if code != 3 || !strings.Contains(stderr, point) {
			t.Fatalf("reconcile armed at %s exited %d, want the crash point's 3\nstdout:\n%s\nstderr:\n%s", point, code, stdout, stderr)
		}
	}
	// Killed after its first compensation: one recorded, nothing refunded.
	crashAt("reconcile_after_orphan")
	if n := countRows(t, db, `SELECT count(*) FROM compensations`); n != 1 {
		t.Fatalf("%d compensations after a run killed at its first orphan, want 1", n)
	}
	// Killed after the provider made its first refund, before tekrar recorded it.
	crashAt("compensation_after_refund")
	if n := countRows(t, db, `SELECT count(*) FROM psp_refunds`); n != 1 {
		t.Fatalf("%d refunds at the provider after a run killed after its first, want 1", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM compensations WHERE state = 'refunded'`); n != 0 {
		t.Fatalf("%d compensations recorded refunded by a run killed before it could record any", n)
	}

	// SIGKILLed as soon as it logs its first refund, so while it drives the others: wherever
	// the kill lands, what the run recorded stands and the runs below finish it.
	killed := startTekrar(t, reconcileEnv(), nil, "reconcile", "--since", "1h")
	waitUntil(t, 30*time.Second, "an orphan to be logged", func() bool {
		return strings.Contains(killed.stderr.String(), "compensated a charge") || killed.exited()
	})
	_ = killed.cmd.Process.Signal(syscall.SIGKILL)
	if code := killed.wait(t, 30*time.Second); code != -1 {
		t.Logf("the run finished (exit %d) before SIGKILL landed", code)
	}

	// Two at once, to the end.
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := startTekrar(t, reconcileEnv(), nil, "reconcile", "--since", "1h")
			if code := p.wait(t, time.Minute); code != 0 {
				t.Errorf("concurrent reconcile %d exited %d\nstdout:\n%s\nstderr:\n%s", i, code, p.stdout, p.stderr)
			}
			outs[i] = p.stdout.String()
		}()
	}
	wg.Wait()
	for i, out := range outs {
		if !strings.Contains(out, fmt.Sprintf("%d charges seen, %d orphans found", orphans, orphans)) {
			t.Errorf("concurrent reconcile %d printed %q", i, out)
		}
	}

	type ledger struct {
		Refunds, Refunded, Compensations, Settled, Audits, Findings int
	}
	for id, amount := range charges {
		got := ledger{
			Refunds:       countRows(t, db, `SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, id),
			Refunded:      countRows(t, db, `SELECT coalesce(sum(amount), 0) FROM psp_refunds WHERE charge_id = $1`, id),
			Compensations: countRows(t, db, `SELECT count(*) FROM compensations WHERE charge_id = $1`, id),
			Settled:       countRows(t, db, `SELECT count(*) FROM compensations WHERE charge_id = $1 AND state = 'refunded'`, id),
			Audits:        countRows(t, db, `SELECT count(*) FROM audit_log WHERE target = $1`, "charge:"+id),
			Findings:      countRows(t, db, `SELECT count(*) FROM reconciliation_findings WHERE charge_id = $1`, id),
		}
		if want := (ledger{1, int(amount), 1, 1, 1, 1}); got != want {
			t.Errorf("charge %s: %+v, want %+v", id, got, want)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM reconciliation_runs WHERE finished_at IS NULL`); n < 2 || n > 3 {
		t.Errorf("%d runs unfinished, want the 3 killed (2 if SIGKILL came after the end)", n)
	}

	// The console shows every orphan charge and the runs.
	port := ports[0]
	_, base := startServe(t, dbURL, port, "TEKRAR_PSP_URL=http://"+pspAddr, "TEKRAR_RECONCILE_EVERY=0")
	page := consolePage(t, dbURL, base, "/admin/reconciliation")
	for id := range charges {
		if !strings.Contains(page, id) {
			t.Errorf("the reconciliation page does not show charge %s", id)
		}
	}
	if !strings.Contains(page, "unfinished") {
		t.Error("the reconciliation page does not show the killed runs as unfinished")
	}
}

// consolePage signs a new operator in to the console at base and returns the page at path.
func consolePage(t *testing.T, dbURL, base, path string) string {
	t.Helper()
	return consoleGet(t, consoleSession(t, dbURL, base), base+path)
}

// consoleSession signs a new operator (a viewer) in to the console at base and returns the
// signed-in client.
func consoleSession(t *testing.T, dbURL, base string) *http.Client {
	t.Helper()
	const password = "reconcile console horse"
	mustRun(t, childEnv("DATABASE_URL="+dbURL), strings.NewReader(password+"\n"), "operators", "create", "--role", "viewer", "recon@example.com")
	jar, _ := cookiejar.New(nil)
	bc := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrf := csrfOf(t, bc, base+"/admin/login")
	r, err := bc.PostForm(base+"/admin/login", url.Values{"csrf": {csrf}, "email": {"recon@example.com"}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", r.StatusCode)
	}
	return bc
}

// consoleGet returns the page at u, which must answer 200.
func consoleGet(t *testing.T, bc *http.Client, u string) string {
	t.Helper()
	r, err := bc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", u, r.StatusCode, err, body)
	}
	return string(body)
}

// TestReconcileBadWindow: a window that is not one is refused with exit 2 and one line,
// before anything is recorded.
func TestReconcileBadWindow(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	mustRun(t, childEnv("DATABASE_URL="+dbURL), nil, "migrate", "up")
	for _, args := range [][]string{
		{"--since", "yesterday"},
		{"--since", "1h", "--until", "2h"},
		{"--since", "2030-01-02T00:00:00Z", "--until", "2030-01-01T00:00:00Z"},
		{"--until", "soon"},
	} {
		stdout, stderr, code := runTekrar(t, childEnv("DATABASE_URL="+dbURL), nil, append([]string{"reconcile"}, args...)...)
		if code != 2 || stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("reconcile %v: exit %d, stdout %q, stderr %q; want 2, nothing, one line", args, code, stdout, stderr)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM reconciliation_runs`); n != 0 {
		t.Errorf("%d runs recorded by refused command lines", n)
	}
}
