package main

// Scheduled tasks across real `tekrar serve` processes: River's leader inserts each tick of
// the sweeper once, one process runs it, and what a kill or a freeze does to that.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// scheduleEnv is a fast schedule: the sweeper every second, nothing else on a schedule.
var scheduleEnv = []string{"TEKRAR_LOG_LEVEL=warn", "TEKRAR_SWEEP_INTERVAL=1s", "TEKRAR_RECONCILE_EVERY=0",
	"TEKRAR_OUTBOX_POLL=100ms"}

// processOf is how run records and River's leader name p: host:pid.
func processOf(t testing.TB, p *proc) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return host + ":" + strconv.Itoa(p.cmd.Process.Pid)
}

// sweepRuns counts the finished runs of the sweep task, by the process named, if any.
func sweepRuns(t testing.TB, db *sqlx.DB, process string) int {
	t.Helper()
	if process == "" {
		return countRows(t, db, `SELECT count(*) FROM schedule_runs WHERE task = 'sweep' AND outcome = 'ok'`)
	}
	return countRows(t, db, `SELECT count(*) FROM schedule_runs WHERE task = 'sweep' AND outcome = 'ok' AND process = $1`, process)
}

// stopServe stops p as an operator would, so that no run is cut short.
func stopServe(t testing.TB, p *proc) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

// checkEachTickOnce checks the sweep's ticks: none ran twice, no tick's job was inserted
// twice, every run finished, and each ran sweep recorded its pass in sweeps (the task's own
// effect) once.
func checkEachTickOnce(t *testing.T, db *sqlx.DB) {
	t.Helper()
	var dups []string
	if err := db.Select(&dups, `SELECT scheduled_for::text || ' x' || count(*) FROM schedule_runs
	     WHERE task = 'sweep' AND trigger = 'schedule' GROUP BY scheduled_for HAVING count(*) > 1`); err != nil {
		t.Fatal(err)
	}
	if len(dups) > 0 {
		t.Errorf("ticks run more than once: %v", dups)
	}
	if n := countRows(t, db, `SELECT count(*) FROM (SELECT args FROM river_job WHERE kind = 'scheduled_task'
	     GROUP BY args HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d ticks inserted more than once", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM schedule_runs WHERE finished_at IS NULL`); n != 0 {
		t.Errorf("%d runs unfinished after a clean stop", n)
	}
	runs, passes := sweepRuns(t, db, ""), countRows(t, db, `SELECT count(*) FROM sweeps`)
	if runs != passes {
		t.Errorf("%d sweep runs recorded, %d passes in sweeps", runs, passes)
	}
}

// TestScheduledTickRunsOnceAcrossReplicas: two replicas, the sweeper every second. Each tick
// is inserted and run once, by one of them, and the ticks follow each other without a gap.
func TestScheduledTickRunsOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	ports := freePorts(t, 2)
	a, _ := startServe(t, dbURL, ports[0], scheduleEnv...)
	b, _ := startServe(t, dbURL, ports[1], scheduleEnv...)
	waitUntil(t, 60*time.Second, "eight sweeps", func() bool { return sweepRuns(t, db, "") >= 8 })
	stopServe(t, a)
	stopServe(t, b)
	checkEachTickOnce(t, db)
	var first, last time.Time
	var ticks int
	if err := db.QueryRow(`SELECT min(scheduled_for), max(scheduled_for), count(DISTINCT scheduled_for)
	     FROM schedule_runs WHERE task = 'sweep'`).Scan(&first, &last, &ticks); err != nil {
		t.Fatal(err)
	}
	if want := int(last.Sub(first)/time.Second) + 1; ticks != want {
		t.Errorf("%d ticks from %s to %s, want %d: a tick was lost", ticks, first, last, want)
	}
}

// TestKilledRunStaysUnfinished: a process SIGKILLed during a sweep leaves that run's record
// unfinished (that is how an operator sees it died), its lock goes with its session, and
// the next tick runs on the other replica and finishes the work.
func TestKilledRunStaysUnfinished(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	ports := freePorts(t, 2)
	// A pauses a minute after each batch of the sweep: killed inside its first.
	a, baseA := startServe(t, dbURL, ports[0], append(scheduleEnv, "TEKRAR_SWEEP_PAUSE=1m", "TEKRAR_SWEEP_BATCH=10")...)
	secret := newClientSecret(t, dbURL, "schedule app")
	for i := range 3 {
		r := mustSend(t, newHTTPClient(), "POST", baseA+"/v1/orders", secret, orderJSONBody(100, "tok_visa"),
			"Idempotency-Key", fmt.Sprintf("sched-%d", i))
		if r.Status != 201 {
			t.Fatalf("order: %d %s", r.Status, r.Body)
		}
	}
	if _, err := db.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	procA := processOf(t, a)
	var killed int64
	waitUntil(t, 30*time.Second, "A to be inside a sweep that tombstoned the keys", func() bool {
		err := db.Get(&killed, `SELECT id FROM schedule_runs WHERE task = 'sweep' AND process = $1 AND finished_at IS NULL
		     AND EXISTS (SELECT 1 FROM key_tombstones)`, procA)
		return err == nil
	})
	a.signal(t, syscall.SIGKILL)
	a.wait(t, 10*time.Second)

	b, _ := startServe(t, dbURL, ports[1], append(scheduleEnv, "TEKRAR_SWEEP_SETTLE=1s")...)
	procB := processOf(t, b)
	waitUntil(t, 60*time.Second, "B's sweeps to delete the expired keys", func() bool {
		return countRows(t, db, `SELECT count(*) FROM idempotency_keys`) == 0 && sweepRuns(t, db, procB) > 0
	})
	stopServe(t, b)
	var r struct {
		Finished *time.Time `db:"finished_at"`
		Outcome  *string    `db:"outcome"`
		At       time.Time  `db:"scheduled_for"`
	}
	if err := db.Get(&r, `SELECT finished_at, outcome, scheduled_for FROM schedule_runs WHERE id = $1`, killed); err != nil {
		t.Fatal(err)
	}
	if r.Finished != nil || r.Outcome != nil {
		t.Errorf("the killed run is recorded finished: %+v", r)
	}
	if n := countRows(t, db, `SELECT count(*) FROM schedule_runs WHERE task = 'sweep' AND process = $1
	     AND outcome = 'ok' AND scheduled_for > $2`, procB, r.At); n == 0 {
		t.Error("no later tick ran after the kill")
	}
}

// TestFrozenLeaderDoesNotRunATickTwice: River's leader is frozen (SIGSTOP) past its
// leadership lease; the other replica is elected and inserts the ticks; the old leader
// wakes (SIGCONT) with its own tick overdue. No tick runs twice.
func TestFrozenLeaderDoesNotRunATickTwice(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	ports := freePorts(t, 2)
	a, _ := startServe(t, dbURL, ports[0], scheduleEnv...)
	b, _ := startServe(t, dbURL, ports[1], scheduleEnv...)
	byName := map[string]*proc{processOf(t, a): a, processOf(t, b): b}
	leader := func() string {
		var id string
		if err := db.Get(&id, `SELECT leader_id FROM river_leader WHERE expires_at > now()`); err != nil {
			return ""
		}
		name, _, _ := strings.Cut(id, "-")
		return name
	}
	var old string
	waitUntil(t, 60*time.Second, "a leader and three sweeps", func() bool {
		old = leader()
		return byName[old] != nil && sweepRuns(t, db, "") >= 3
	})
	frozen := byName[old]
	frozen.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { _ = frozen.cmd.Process.Signal(syscall.SIGCONT) })
	var next string
	waitUntil(t, 90*time.Second, "the other replica to lead and sweep three times", func() bool {
		if next == "" {
			if l := leader(); l != "" && l != old {
				next = l
				t.Logf("leader %s frozen; %s elected", old, next)
			}
			return false
		}
		return sweepRuns(t, db, next) >= 3
	})
	before := sweepRuns(t, db, "")
	frozen.signal(t, syscall.SIGCONT)
	waitUntil(t, 60*time.Second, "three sweeps after the wake", func() bool { return sweepRuns(t, db, "") >= before+3 })
	stopServe(t, a)
	stopServe(t, b)
	checkEachTickOnce(t, db)
}
