package main

// The crash harness: real `tekrar serve` processes die at the worst moments (armed crash
// points, SIGKILL, a database restart) while clients retry their payments, and afterwards
// the database and the provider's ledger must still say that every payment happened once.
//
// The provider process is the sandbox in one of its modes, each a kind of processor tekrar
// meets (docs/providers.md): "keys" (`tekrar psp`: keys replayed for ever, a cancel fences),
// "no-cancel" (`tekrar psp --no-cancel`: keys replayed, nothing fenced, a refund owed
// instead) and "keyless" (`tekrar psp --keyless`: every request a new charge, found by
// reference only). TEKRAR_CRASH_PROVIDERS names the modes to run, a comma-separated list of
// those words (default: all three). A run costs about as much as any other, so by default
// "keys" meets each fault on its own (crash points, SIGKILL, a database restart) and the
// others meet one run with crash points armed and SIGKILL together; TEKRAR_CRASH_FAULTS=all
// runs every fault in every mode.
//
// Sizes are small by default so that CI runs it in seconds; for a longer run:
//
//	TEKRAR_CRASH_REQUESTS=5000 TEKRAR_CRASH_KILLS=50 go test -run Crash -v ./cmd/tekrar/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/ledgercheck"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestCrash runs the harness in each provider mode and fault mode. It is not parallel: the
// database restart would hit every other test's database, and the kills want the machine to
// themselves.
func TestCrash(t *testing.T) {
	every := os.Getenv("TEKRAR_CRASH_FAULTS") == "all"
	for _, p := range crashProvidersOf(t) {
		t.Run(p.name, func(t *testing.T) {
			faults := []crashMode{crashPointsAndKills}
			if p.fences || every {
				faults = crashFaults
			}
			for _, mode := range faults {
				mode.provider = p
				t.Run(mode.test, func(t *testing.T) {
					if mode.dbRestart && os.Getenv(dbtest.EnvURL) != "" {
						t.Skip("restarts the private test database server; unset " + dbtest.EnvURL)
					}
					runCrash(t, mode)
				})
			}
		})
	}
}

// crashProvider is a mode of the provider process.
type crashProvider struct {
	name   string   // the subtest's name, and its word in TEKRAR_CRASH_PROVIDERS
	flags  []string // tekrar psp's flags
	fences bool     // a charge given up on is canceled at the provider: no refund is ever owed
}

var crashProviders = []crashProvider{
	{name: "keys", fences: true},
	{name: "no-cancel", flags: []string{"--no-cancel"}},
	{name: "keyless", flags: []string{"--keyless"}},
}

// crashProvidersOf is the provider modes TEKRAR_CRASH_PROVIDERS names, in crashProviders'
// order; all of them when it is unset.
func crashProvidersOf(t *testing.T) []crashProvider {
	t.Helper()
	s := os.Getenv("TEKRAR_CRASH_PROVIDERS")
	if s == "" {
		return crashProviders
	}
	want := map[string]bool{}
	for w := range strings.SplitSeq(s, ",") {
		w = strings.TrimSpace(w)
		if !slices.ContainsFunc(crashProviders, func(p crashProvider) bool { return p.name == w }) {
			t.Fatalf("TEKRAR_CRASH_PROVIDERS=%q: %q is none of keys, no-cancel, keyless", s, w)
		}
		want[w] = true
	}
	var out []crashProvider
	for _, p := range crashProviders {
		if want[p.name] {
			out = append(out, p)
		}
	}
	return out
}

// The fault modes: each on its own, and crash points with SIGKILL in one run, which the
// provider modes other than "keys" meet by default.
var (
	crashFaults = []crashMode{
		{test: "CrashPoints", name: "crash points", armed: true},
		{test: "SIGKILL", name: "SIGKILL", sigkill: true},
		{test: "DatabaseRestart", name: "database restart", dbRestart: true},
	}
	crashPointsAndKills = crashMode{test: "CrashPointsAndSIGKILL", name: "crash points and SIGKILL", armed: true, sigkill: true}
)

type crashMode struct {
	test      string // the subtest's name
	name      string
	armed     bool // TEKRAR_CRASH_AT set on the servers
	sigkill   bool // a killer goroutine SIGKILLs servers
	dbRestart bool // the database server restarts under load
	provider  crashProvider
}

type completerTotals struct{ Completed, Canceled, Attention, Retry int }

func (a *completerTotals) add(b completerTotals) {
	a.Completed += b.Completed
	a.Canceled += b.Canceled
	a.Attention += b.Attention
	a.Retry += b.Retry
}

// crashRun is one run's serve replicas, restarted with the same settings whenever they die
// as an orchestrator would (proctest.Replicas), and what it counts of them.
type crashRun struct {
	mode     crashMode
	replicas *proctest.Replicas
	crashes  atomic.Int64 // exits at an armed crash point
	kills    atomic.Int64

	mu sync.Mutex
	// completer is each incarnation's completer totals, last seen: a dead process takes
	// its totals with it.
	completer map[*proctest.Proc]completerTotals
}

func runCrash(t *testing.T, mode crashMode) {
	requests := proctest.EnvSize(t, "TEKRAR_CRASH_REQUESTS", 300)
	kills := proctest.EnvSize(t, "TEKRAR_CRASH_KILLS", 6)
	start := time.Now()

	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	ports := freePorts(t, 3)

	// The provider runs on the same database and is never killed: it is the ledger the
	// invariants are checked against.
	pspAddr := addrOf(ports[2])
	psp := startTekrar(t, childEnv("DATABASE_URL="+dbURL, "TEKRAR_PSP_ADDR="+pspAddr), nil,
		append([]string{"psp"}, mode.provider.flags...)...)
	// A refund's look-up: every mode answers it (a key-less provider answers a charge's by
	// key 501 lookup_unsupported).
	proctest.WaitUp(t, psp.Proc, "http://"+pspAddr, "/refunds/none", 30*time.Second)
	secret := newClientSecret(t, dbURL, "crash app")

	r := &crashRun{mode: mode, replicas: proctest.NewReplicas(t), completer: map[*proctest.Proc]completerTotals{}}
	// The exits the run causes: an armed crash point (exit status 3) and its SIGKILLs.
	r.replicas.Expected = func(p *proctest.Proc) bool {
		ws, _ := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case p.Cmd.ProcessState.ExitCode() == 3 && mode.armed:
			r.crashes.Add(1)
			return true
		case ws.Signaled() && ws.Signal() == syscall.SIGKILL && mode.sigkill:
			return true
		}
		return false
	}
	for _, port := range ports[:2] {
		env := []string{
			"DATABASE_URL=" + dbURL, "TEKRAR_ADDR=" + addrOf(port), "TEKRAR_PSP_URL=http://" + pspAddr,
			"TEKRAR_LOG_LEVEL=warn", "TEKRAR_LEASE=2s", "TEKRAR_COMPLETER_INTERVAL=200ms",
			"TEKRAR_COMPLETER_GRACE=1s", "TEKRAR_PROVIDER_TIMEOUT=1s", "TEKRAR_SWEEP_INTERVAL=24h",
		}
		if mode.armed {
			env = append(env, "TEKRAR_CRASH_AT=after_claim,after_provider,after_complete", "TEKRAR_CRASH_RATE=0.05")
		}
		r.replicas.Add("http://"+addrOf(port), childEnv(env...), 30*time.Second)
	}

	// The supervisor restarts a dead server with the same settings, as an orchestrator would.
	supervise, stopSupervise := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() { r.replicas.Supervise(supervise) })
	bg.Go(func() { r.pollCompleters(supervise) })

	// Faults.
	faults, stopFaults := context.WithCancel(context.Background())
	var faultWG sync.WaitGroup
	var dbRestarts atomic.Int64
	var faultsDone atomic.Bool // the load goes on until every fault was injected
	faultsDone.Store(!mode.sigkill && !mode.dbRestart)
	if mode.sigkill {
		faultWG.Go(func() {
			defer faultsDone.Store(true)
			for int(r.kills.Load()) < kills {
				if proctest.Sleep(faults, time.Duration(200+rand.IntN(600))*time.Millisecond) != nil {
					return
				}
				p := r.replicas.List[rand.IntN(len(r.replicas.List))].Proc()
				if p.Exited() {
					continue
				}
				if err := p.Cmd.Process.Signal(syscall.SIGKILL); err == nil {
					r.kills.Add(1)
				}
			}
		})
	}
	if mode.dbRestart {
		srv := dbtest.Server(t)
		faultWG.Go(func() {
			defer faultsDone.Store(true)
			for range min(kills, 3) {
				if proctest.Sleep(faults, time.Duration(700+rand.IntN(800))*time.Millisecond) != nil {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := srv.Restart(ctx)
				cancel()
				if err != nil {
					t.Errorf("restart the database server: %v", err)
					return
				}
				dbRestarts.Add(1)
			}
		})
	}

	// Load: clients paying, retrying the same key after an ambiguous answer.
	const workers = 8
	var sent, nextAmount atomic.Int64
	nextAmount.Store(100)
	intents := make([][]*ledgercheck.Intent, workers)
	c := newHTTPClient()
	c.Timeout = 15 * time.Second
	var load sync.WaitGroup
	for w := range workers {
		load.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for i := 0; ; i++ {
				if sent.Load() >= int64(requests) && faultsDone.Load() {
					return
				}
				// Every intent has an amount of its own: in the provider's ledger the
				// amount ties a charge to the intent it was made for (ledgercheck.Intent).
				in := &ledgercheck.Intent{
					Kind:   ledgercheck.KindPay,
					Key:    fmt.Sprintf("crash-%d-%d-%d", start.UnixNano(), w, i),
					Amount: nextAmount.Add(1 + rng.Int64N(50)),
					Token:  "tok_visa",
				}
				switch n := rng.IntN(40); {
				case n < 5:
					in.Token = "tok_declined"
				case n < 7:
					// Charged at the provider, but its answer never comes: the outcome is
					// unknown (503 payment_pending) until a retry or the completer looks it up.
					in.Token = "tok_timeout"
				}
				intents[w] = append(intents[w], in)
				body := crashOrderBody(in.Amount, in.Token)
				tries := 1 + rng.IntN(6) // some give up early: abandoned keys for the completer
				backoff := 50 * time.Millisecond
				for try := 0; try < tries; try++ {
					sent.Add(1)
					base := r.replicas.List[rng.IntN(len(r.replicas.List))].Base
					res, err := send(c, "POST", base+"/v1/orders", secret, body,
						"Idempotency-Key", in.Key, "Prefer", "wait=3")
					a := record(res, err)
					in.Answers = append(in.Answers, a)
					if err == nil && !retryable(a) {
						break
					}
					time.Sleep(backoff/2 + time.Duration(rng.Int64N(int64(backoff))))
					backoff = min(2*backoff, 800*time.Millisecond)
				}
			}
		})
	}
	// The load ends when its requests are sent and every fault was injected: a small request
	// budget must not end the load before its kills.
	load.Wait()
	stopFaults()
	faultWG.Wait()
	loadDone := time.Now()

	// Both servers up, every key settled by retries or by the completer.
	for _, s := range r.replicas.List {
		waitUntil(t, 60*time.Second, "server "+s.Base+" to be up", func() bool {
			return !s.Proc().Exited() && proctest.Ready(s.Base)
		})
	}
	noKeyInProgress := func() bool {
		return countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'`) == 0
	}
	settleFor(t, 60*time.Second, "no key in progress", noKeyInProgress)
	settled := time.Since(loadDone)

	// Late retries: every client comes back once with its key, after everything settled,
	// so that the completer's answers (paid, or payment_abandoned) are seen by a client too.
	var late sync.WaitGroup
	lateCh := make(chan *ledgercheck.Intent)
	var lateReplays atomic.Int64
	for range workers {
		late.Go(func() {
			for in := range lateCh {
				// Nothing fails any more: a few tries must get every key its outcome (a key
				// that never reached a server is first executed now, and tok_timeout answers
				// 503 payment_pending once before the retry finds its charge).
				// Armed crash points may still fire on a first execution, and a crashed server
				// takes a while to come back on a loaded machine: retry for a while, not a
				// number of times.
				var a answer
				for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); {
					base := r.replicas.List[rand.IntN(len(r.replicas.List))].Base
					res, err := send(c, "POST", base+"/v1/orders", secret, crashOrderBody(in.Amount, in.Token),
						"Idempotency-Key", in.Key, "Prefer", "wait=3")
					a = record(res, err)
					in.Answers = append(in.Answers, a)
					lateReplays.Add(1)
					if final(a) {
						break
					}
					time.Sleep(300 * time.Millisecond)
				}
				if !final(a) {
					t.Errorf("late retries of key %s: %d %s %s, want its outcome", in.Key, a.Status, a.Body, a.Err)
				}
			}
		})
	}
	for _, w := range intents {
		for _, in := range w {
			lateCh <- in
		}
	}
	close(lateCh)
	late.Wait()
	settleFor(t, 60*time.Second, "no key in progress after the late retries", noKeyInProgress)
	// A charge the provider made after its order was given up on (a provider that cannot
	// fence) is refunded by a compensation, on its own schedule.
	settleFor(t, 60*time.Second, "every succeeded charge to be an order's payment or refunded in full", func() bool {
		return countRows(t, db, `SELECT count(*) FROM psp_charges c WHERE c.status = 'succeeded'
			AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.provider_charge_id = c.id)
			AND c.refunded_amount < c.amount`) == 0
	})
	// Every event dispatched before the replicas stop: a row of the outbox queue is an event
	// not yet dispatched (a discarded one is left for the invariants to report).
	settleFor(t, 60*time.Second, "every event to be dispatched", func() bool {
		return countRows(t, db, `SELECT count(*) FROM outbox_queue WHERE discarded_at IS NULL`) == 0
	})
	stopSupervise()
	bg.Wait()
	r.replicas.Stop()
	for _, s := range r.replicas.List {
		if tot, ok := fetchCompleter(s.Base); ok {
			r.completer[s.Proc()] = tot
		}
	}
	var total completerTotals
	for _, tot := range r.completer {
		total.add(tot)
	}

	// What the clients saw.
	var all []*ledgercheck.Intent
	for _, w := range intents {
		all = append(all, w...)
	}
	byStatus := map[string]int{}
	var attempts int
	for _, in := range all {
		for _, a := range in.Answers {
			attempts++
			switch {
			case a.Err != "":
				byStatus["transport error"]++
			case a.Code != "":
				byStatus[fmt.Sprintf("%d %s", a.Status, a.Code)]++
			default:
				byStatus[strconv.Itoa(a.Status)]++
			}
			if a.Err == "" && !expectedStatus(a.Status) {
				t.Errorf("key %s: unexpected answer %d %s", in.Key, a.Status, a.Body)
			}
			if a.Err == "" && a.Status >= 400 && a.Code == "" {
				t.Errorf("key %s: answer %d is not a problem: %s", in.Key, a.Status, a.Body)
			}
			if mode.dbRestart && a.Err != "" {
				t.Errorf("key %s: no answer while the database restarted (servers must keep answering): %s", in.Key, a.Err)
			}
		}
	}

	checkCrashInvariants(t, db, all, mode.provider)
	r.replicas.CheckOutput()

	// The history checker the failover harness uses too (internal/ledgercheck), on the same
	// record: what each client was told against the provider's ledger (a charge is its
	// intent's by its amount, whatever its key, so a key-less provider's charges are counted
	// too) and tekrar's database.
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	ledger, err := ledgercheck.ReadLedger(rctx, db)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledgercheck.ReadStore(rctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rep := ledgercheck.Check(all, ledger, store)
	if !rep.Clean() {
		t.Errorf("the history breaks the promise: %v", rep)
	}

	var paid, declined, canceled, pending int
	for status, n := range map[string]*int{"paid": &paid, "declined": &declined, "canceled": &canceled, "pending": &pending} {
		*n = countRows(t, db, `SELECT count(*) FROM orders WHERE status = $1`, status)
	}
	keys := countRows(t, db, `SELECT count(*) FROM idempotency_keys`)
	compensated := countRows(t, db, `SELECT count(*) FROM psp_charges c WHERE c.status = 'succeeded'
		AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.provider_charge_id = c.id)`)
	statuses := make([]string, 0, len(byStatus))
	for s := range byStatus {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	var sb strings.Builder
	for _, s := range statuses {
		fmt.Fprintf(&sb, "\n    %-40s %d", s, byStatus[s])
	}
	t.Logf(`crash harness (provider %s, %s): %v
  intents %d, requests sent %d (budget %d, more if the faults outlast it), late retries %d (after the faults, until each key has its outcome), keys in the database %d
  answers:%s
  faults: crash-point exits %d, SIGKILLs %d, database restarts %d, server restarts %d
  orders: paid %d, declined %d, canceled %d, pending %d; succeeded charges without a payment (compensated, refunded) %d
  completer totals (summed over incarnations, approximate): completed %d, canceled %d, attention %d, retry %d
  settled %v after the load; whole run %v`,
		mode.provider.name, mode.name, rep, len(all), attempts-int(lateReplays.Load()), requests, lateReplays.Load(), keys, sb.String(),
		r.crashes.Load(), r.kills.Load(), dbRestarts.Load(), r.replicas.Restarts(),
		paid, declined, canceled, pending, compensated,
		total.Completed, total.Canceled, total.Attention, total.Retry,
		settled.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	for _, f := range rep.Findings {
		t.Logf("  %s", f)
	}
	if mode.dbRestart && byStatus["503 store_unavailable"]+byStatus["503 payment_pending"] == 0 {
		// The restarts fell between requests: the invariants still hold, but the test did
		// not see the outage.
		t.Logf("no request met the database outage")
	}
	if mode.armed && r.crashes.Load() == 0 {
		t.Error("no crash point fired: the run proves nothing")
	}
}

// pollCompleters keeps the last completer totals of each live incarnation, since a dead
// process takes its totals with it.
func (r *crashRun) pollCompleters(ctx context.Context) {
	c := &http.Client{Timeout: time.Second}
	for proctest.Sleep(ctx, 100*time.Millisecond) == nil {
		for _, s := range r.replicas.List {
			p := s.Proc()
			res, err := send(c, "GET", s.Base+"/readyz/completer", "", nil)
			if err != nil || res.Status != 200 {
				continue
			}
			var tot completerTotals
			if json.Unmarshal(res.Body, &tot) != nil {
				continue
			}
			if s.Proc() == p && !p.Exited() {
				r.mu.Lock()
				r.completer[p] = tot
				r.mu.Unlock()
			}
		}
	}
}

// checkCrashInvariants checks, with SQL against the shop's tables and the provider's
// ledger, that every payment happened once, and that every client saw one outcome per key.
// A charge is tied to its order by its description, which names the order's public id, and
// never by its key alone: a key-less provider (keyed false) keeps the key as a reference that
// any number of charges may hold.
func checkCrashInvariants(t *testing.T, db *sqlx.DB, intents []*ledgercheck.Intent, provider crashProvider) {
	t.Helper()
	violations := func(what, query string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rows, err := db.QueryxContext(ctx, query)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			m := map[string]any{}
			if err := rows.MapScan(m); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for k, v := range m {
				if b, ok := v.([]byte); ok {
					m[k] = string(b)
				}
			}
			if n++; n <= 10 {
				t.Errorf("INVARIANT VIOLATED: %s: %v", what, m)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n > 10 {
			t.Errorf("INVARIANT VIOLATED: %s: %d rows in all", what, n)
		}
	}

	// 1. Every provider charge belongs to exactly one order.
	violations("a succeeded charge is not referenced by exactly one payment and is not fully refunded", `
		SELECT c.id, c.key, c.amount, c.refunded_amount, c.description,
		       (SELECT count(*) FROM payments p WHERE p.provider_charge_id = c.id) AS payments,
		       (SELECT coalesce(sum(amount), 0) FROM psp_refunds r WHERE r.charge_id = c.id) AS refunded
		  FROM psp_charges c
		 WHERE c.status = 'succeeded'
		   AND (SELECT count(*) FROM payments p WHERE p.provider_charge_id = c.id) <> 1
		   AND NOT (c.refunded_amount = c.amount
		            AND (SELECT coalesce(sum(amount), 0) FROM psp_refunds r WHERE r.charge_id = c.id) = c.amount)`)
	violations("a charge of a paid order was refunded (this test refunds nothing)", `
		SELECT c.id, c.amount, c.refunded_amount, p.order_id
		  FROM psp_charges c JOIN payments p ON p.provider_charge_id = c.id
		 WHERE c.refunded_amount <> 0 OR EXISTS (SELECT 1 FROM psp_refunds r WHERE r.charge_id = c.id)`)
	violations("a compensated charge belongs to an order that is not canceled", `
		SELECT c.id, c.description, o.id AS order_id, o.status
		  FROM psp_charges c
		  LEFT JOIN orders o ON c.description = 'order ' || o.public_id
		 WHERE c.status = 'succeeded'
		   AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.provider_charge_id = c.id)
		   AND o.status IS DISTINCT FROM 'canceled'`)
	violations("an order was charged more than once at the provider", `
		SELECT c.description, count(*) AS charges, array_agg(c.id) AS ids
		  FROM psp_charges c WHERE c.status = 'succeeded'
		 GROUP BY c.description HAVING count(*) > 1`)
	violations("a succeeded charge names no order", `
		SELECT c.id, c.key, c.keyed, c.amount, c.description
		  FROM psp_charges c
		 WHERE c.status = 'succeeded'
		   AND NOT EXISTS (SELECT 1 FROM orders o WHERE c.description = 'order ' || o.public_id)`)
	violations("a payment's charge names another order", `
		SELECT p.order_id, o.public_id, c.id, c.description
		  FROM payments p JOIN orders o ON o.id = p.order_id JOIN psp_charges c ON c.id = p.provider_charge_id
		 WHERE c.description <> 'order ' || o.public_id`)
	violations("a paid order has no payment of a succeeded charge in the ledger", `
		SELECT o.id, o.public_id, o.status, p.provider_charge_id, c.status AS charge_status
		  FROM orders o
		  LEFT JOIN payments p ON p.order_id = o.id
		  LEFT JOIN psp_charges c ON c.id = p.provider_charge_id
		 WHERE o.status IN ('paid', 'partially_refunded', 'refunded')
		   AND c.status IS DISTINCT FROM 'succeeded'`)
	violations("an order that is not paid has a charge standing at the provider (charged net)", `
		SELECT o.id, o.public_id, o.status, sum(c.amount - c.refunded_amount) AS net, array_agg(c.id) AS charges
		  FROM orders o JOIN psp_charges c ON c.description = 'order ' || o.public_id AND c.status = 'succeeded'
		 WHERE o.status NOT IN ('paid', 'partially_refunded', 'refunded')
		 GROUP BY o.id, o.public_id, o.status
		HAVING sum(c.amount - c.refunded_amount) <> 0`)

	// 1b. A refund owed is owed for an order given up on, and made once, for its charge.
	if provider.fences {
		violations("a refund is owed although the provider fences every charge given up on", `
			SELECT id, order_id, charge_key, state, charge_id, reason FROM compensations`)
	} else {
		violations("an order was canceled without a fence and owes no refund", `
			SELECT o.id, o.public_id FROM orders o
			 WHERE o.status = 'canceled' AND NOT EXISTS (SELECT 1 FROM compensations m WHERE m.order_id = o.id)`)
	}
	violations("a compensation's order is not canceled, or its refund is not its charge's, in full", `
		SELECT m.id, m.state, m.charge_id, m.refund_id, m.amount, o.status, r.charge_id AS refund_charge, r.amount AS refunded
		  FROM compensations m
		  JOIN orders o ON o.id = m.order_id
		  LEFT JOIN psp_refunds r ON r.id = m.refund_id
		 WHERE o.status <> 'canceled'
		    OR (m.state = 'refunded' AND (r.id IS NULL OR r.charge_id <> m.charge_id OR r.amount <> m.amount))`)
	violations("a payment references a missing or different provider charge", `
		SELECT p.order_id, p.provider_charge_id, p.amount, p.status, c.id AS charge, c.amount AS charge_amount, c.status AS charge_status
		  FROM payments p LEFT JOIN psp_charges c ON c.id = p.provider_charge_id
		 WHERE c.id IS NULL OR c.amount <> p.amount OR c.status <> p.status OR c.key <> p.provider_key`)

	// 2. Every order has at most one charge, for its amount, and a final status that agrees.
	violations("an order's payment disagrees with the order", `
		SELECT o.id, o.status, o.amount, o.captured_amount, p.amount AS paid, p.status AS payment_status
		  FROM orders o LEFT JOIN payments p ON p.order_id = o.id
		 WHERE o.status = 'pending'
		    OR (p.order_id IS NOT NULL AND p.amount <> o.amount)
		    OR (o.status IN ('paid', 'partially_refunded', 'refunded') AND (p.status IS DISTINCT FROM 'succeeded' OR o.captured_amount <> o.amount))
		    OR (o.status = 'declined' AND (p.status IS DISTINCT FROM 'declined' OR o.captured_amount <> 0))
		    OR (o.status = 'canceled' AND (p.order_id IS NOT NULL OR o.captured_amount <> 0))`)
	violations("an order has no key, or more than one", `
		SELECT o.id, o.status, (SELECT count(*) FROM idempotency_keys k WHERE k.order_id = o.id) AS keys
		  FROM orders o
		 WHERE (SELECT count(*) FROM idempotency_keys k WHERE k.order_id = o.id) <> 1`)

	// 2b. Every settled order has exactly the events of its settlement, each dispatched once:
	// crashes at every point, kills and a database restart write an event exactly when its
	// change committed, and its dispatch's effect (an order.paid event's receipt) exactly
	// when its row left the outbox queue.
	violations("an order's events disagree with its status (one order.paid per paid order, one order.declined per declined one, none before)", `
		SELECT o.id, o.status,
		       (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.paid') AS paid_events,
		       (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.declined') AS declined_events
		  FROM orders o
		 WHERE (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.paid') <> (o.status = 'paid')::int
		    OR (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.declined') <> (o.status = 'declined')::int`)
	violations("an event was not dispatched (its row is left in the outbox queue, waiting or discarded)", `
		SELECT q.event_id, e.type, e.order_id, q.attempts, q.discarded_at, q.last_error
		  FROM outbox_queue q LEFT JOIN outbox_events e ON e.id = q.event_id`)
	violations("an order.paid event has no receipt, or more than one (its dispatch's effect)", `
		SELECT e.id, e.order_id, (SELECT count(*) FROM receipts r WHERE r.event_id = e.id) AS receipts
		  FROM outbox_events e
		 WHERE e.type = 'order.paid' AND (SELECT count(*) FROM receipts r WHERE r.event_id = e.id) <> 1`)
	violations("a receipt belongs to no order.paid event", `
		SELECT r.id, r.event_id, r.kind, r.order_id
		  FROM receipts r
		 WHERE NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.id = r.event_id AND e.type = 'order.paid' AND e.order_id = r.order_id)`)

	// 3. Every key ends completed, or with an operator and a reason.
	violations("a key did not end completed (or needs_attention with a reason)", `
		SELECT k.id, k.key, k.state, k.recovery_point, k.attention_reason, k.order_id
		  FROM idempotency_keys k
		 WHERE NOT (k.state = 'completed' AND k.response_status IS NOT NULL AND k.response_body IS NOT NULL)
		   AND NOT (k.state = 'needs_attention' AND coalesce(k.attention_reason, '') <> '')`)
	violations("a completed key's stored answer disagrees with its order", `
		SELECT k.id, k.key, k.response_status, o.id AS order_id, o.status
		  FROM idempotency_keys k JOIN orders o ON o.id = k.order_id
		 WHERE k.state = 'completed' AND NOT (
		       (k.response_status = 201 AND o.status IN ('paid', 'partially_refunded', 'refunded'))
		    OR (k.response_status = 402 AND o.status = 'declined')
		    OR (k.response_status = 409 AND o.status = 'canceled'))`)

	// 4. Every answer a client got for a key is the same answer, and the stored one.
	type stored struct {
		Key    string `db:"key"`
		State  string `db:"state"`
		Status *int   `db:"response_status"`
		Body   []byte `db:"response_body"`
	}
	var rows []stored
	if err := db.Select(&rows, `SELECT key, state, response_status, response_body FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]stored{}
	for _, s := range rows {
		byKey[s.Key] = s
	}
	bad := 0
	for _, in := range intents {
		s, ok := byKey[in.Key]
		first, other := disagreement(in.Answers, final)
		switch {
		case first == nil:
		case !ok:
			bad++
			t.Errorf("INVARIANT VIOLATED: key %s answered %d but has no row", in.Key, first.Status)
		case other != nil:
			bad++
			t.Errorf("INVARIANT VIOLATED: key %s got two answers:\n%d %s\n%d %s", in.Key, first.Status, first.Body, other.Status, other.Body)
		case s.Status == nil || *s.Status != first.Status || !bytes.Equal(s.Body, first.Body):
			bad++
			st := 0
			if s.Status != nil {
				st = *s.Status
			}
			t.Errorf("INVARIANT VIOLATED: key %s answered %d %s, stored %s %d %s", in.Key, first.Status, first.Body, s.State, st, s.Body)
		}
		if bad > 10 {
			t.Fatal("too many violations")
		}
		// The outcome must match the card: tok_declined never pays, the others never decline.
		if first != nil && ((in.Token == "tok_declined" && first.Status == 201) || (in.Token != "tok_declined" && first.Status == 402)) {
			t.Errorf("INVARIANT VIOLATED: key %s paid with %s got %d %s", in.Key, in.Token, first.Status, first.Body)
		}
		// An abandoned payment says "nothing was charged" only where the provider fenced
		// the charge; elsewhere it says that a late charge is refunded.
		if first != nil && first.Code == "payment_abandoned" && strings.Contains(string(first.Body), "nothing was charged") != provider.fences {
			t.Errorf("INVARIANT VIOLATED: key %s abandoned at a provider that fences (%t): %s", in.Key, provider.fences, first.Body)
		}
	}
}

func fetchCompleter(base string) (completerTotals, bool) {
	c := &http.Client{Timeout: time.Second}
	r, err := send(c, "GET", base+"/readyz/completer", "", nil)
	var tot completerTotals
	if err != nil || r.Status != 200 || json.Unmarshal(r.Body, &tot) != nil {
		return tot, false
	}
	return tot, true
}

// crashOrderBody is an intent's order: the body of orderJSONBody with a customer e-mail
// (one per amount, which is the intent's own), so that dispatching its order.paid event
// records a receipt (kept: no SMTP server is configured), the effect by which the
// invariants see that the event was dispatched, once. Every try of a key sends it alike.
func crashOrderBody(amount int64, token string) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":%d}],"amount":%d,`+
		`"customer":{"email":"buyer%d@example.com"},"payment":{"card_token":%q}}`, amount, amount, amount, token))
}

// settleFor waits for cond as waitUntil does, but a timeout fails the test without ending
// it: the invariants are still checked, and say what the unsettled state left behind. It
// polls every 100 ms, not 20, since its conditions are SQL queries on a loaded machine.
func settleFor(t *testing.T, timeout time.Duration, what string, cond func() bool) bool {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("timed out after %v waiting for %s", timeout, what)
			return false
		}
	}
	return true
}
