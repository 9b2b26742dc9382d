package failover

// The failover harness: two `tekrar serve` replicas on a three-node Patroni cluster
// (internal/cluster), reaching the primary through its several-host URL, while retrying
// clients pay and refund; the leader is SIGKILLed, frozen past its TTL and switched over
// under them. The provider runs as its own process with its ledger outside the cluster, so
// that no failover can lose what the provider did. Afterwards the history checker
// (internal/ledgercheck) compares what each client was told with that ledger and with
// what the cluster holds.
//
// The control run shows the checker catching a double charge: the provider keys of the
// old derivation (from the key row, not the intent), asynchronous replication, and rows
// lost on purpose.
//
// Sizes are small by default so that CI runs both in a few minutes; for a longer run:
//
//	TEKRAR_FAILOVER_FAULTS=12 TEKRAR_FAILOVER_CLIENTS=16 go test -timeout 60m -run Failover -v ./cmd/tekrar/failover/
//
// TEKRAR_FAILOVER_KINDS (default kill,freeze,switchover) is the cycle of faults;
// TEKRAR_FAILOVER_LOSSES (default 1) the control run's rounds of lost rows.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/cluster"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/ledgercheck"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestFailover runs the harness on synchronous replication, where the promise must hold
// through every failover, and then the control run. It is not parallel: the cluster and
// its failovers want the machine to themselves.
func TestFailover(t *testing.T) {
	if err := cluster.Available(); err != nil {
		if os.Getenv("TEKRAR_CLUSTER_REQUIRED") == "1" {
			t.Fatalf("TEKRAR_CLUSTER_REQUIRED=1 but no cluster can run here: %v", err)
		}
		t.Skipf("no local cluster can run here (set TEKRAR_CLUSTER_REQUIRED=1 to fail instead): %v", err)
	}
	// Both runs take 3 to 5 minutes on a loaded two-core machine: a binary that would be
	// killed by its -timeout half-way says so instead of leaving a panic.
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < 6*time.Minute {
		t.Fatalf("TestFailover needs about 5 minutes and the test binary has %v left: run go test with a longer -timeout (30m)",
			time.Until(deadline).Round(time.Second))
	}
	t.Run("Synchronous", func(t *testing.T) {
		r := runFailover(t, failoverMode{name: "synchronous"})[intentKeys]
		if !r.Clean() {
			t.Errorf("the history breaks the promise: %v\n  %s", r, strings.Join(r.Findings, "\n  "))
		}
	})
	t.Run("Control", func(t *testing.T) {
		reps := runFailover(t, failoverMode{name: "control: asynchronous, rows lost", control: true})
		old, cur := reps[oldKeys], reps[intentKeys]
		if old.DoubleCharges+old.CompensatedDoubleCharges == 0 {
			t.Errorf("rows were lost under the old provider keys and the checker found no double charge: %v", old)
		}
		// The same loss under the intent's provider keys: acknowledged answers are lost
		// (asynchronous replication loses commits), but a lost row's retry meets its first
		// charge and refund at the provider instead of making new ones.
		if cur.LostPayments+cur.ReplaysDiffer == 0 {
			t.Errorf("no row of a payment under the intent's provider keys was lost: the run shows nothing of them: %v", cur)
		}
		if cur.DoubleCharges+cur.CompensatedDoubleCharges+cur.DoubleRefunds != 0 {
			t.Errorf("a lost row under the intent's provider keys was charged or refunded again: %v", cur)
		}
	})
}

// The control run's clients are of two groups: the even ones' keys get the old provider
// keys (a trigger leaves their key rows' intent NULL), the odd ones' keep the intent's.
// The synchronous run has only the second.
const (
	oldKeys    = "old provider keys"
	intentKeys = "intent provider keys"
)

// oldKeyPrefix starts the keys of the clients that get the old provider keys.
const oldKeyPrefix = "fo-old-"

type failoverMode struct {
	name string
	// control: asynchronous replication with no bound on the lag a failover may lose, the
	// old provider keys for half of the clients, and the standbys frozen under load before
	// the leader is killed.
	control bool
}

// failoverCounts are the faults a run injected.
type failoverCounts struct {
	kills, freezes, switchovers, losses atomic.Int64
	secondPrimaryWrites                 atomic.Int64 // writes a thawed old leader acknowledged
}

// runFailover runs the harness and returns the checker's report on each group of clients.
func runFailover(t *testing.T, mode failoverMode) map[string]ledgercheck.Report {
	faults := proctest.EnvSize(t, "TEKRAR_FAILOVER_FAULTS", 3)
	workers := proctest.EnvSize(t, "TEKRAR_FAILOVER_CLIENTS", 8)
	kinds := []string{"kill", "freeze", "switchover"}
	if v := os.Getenv("TEKRAR_FAILOVER_KINDS"); v != "" {
		kinds = strings.Split(v, ",")
		for _, k := range kinds {
			if _, ok := faultKinds[k]; !ok || k == "lose" {
				t.Fatalf("TEKRAR_FAILOVER_KINDS=%q: %q is not kill, freeze or switchover", v, k)
			}
		}
	}
	if mode.control {
		faults = proctest.EnvSize(t, "TEKRAR_FAILOVER_LOSSES", 1)
	}
	start := time.Now()
	// Every fault is bounded at three minutes; so are the start and the last healthy wait.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(faults+2)*3*time.Minute)
	defer cancel()

	// TEKRAR_CLUSTER_ETCD3=1 runs Patroni on etcd's v3 API, whose leader key a leader
	// woken from a freeze can take back (internal/cluster's config.go): the harness then
	// shows what that loses.
	opts := cluster.Options{EtcdV3: os.Getenv("TEKRAR_CLUSTER_ETCD3") == "1"}
	if mode.control {
		opts.Async = true
		opts.MaximumLagOnFailover = 1 << 40
	}
	cl, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start the cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	t.Logf("cluster of %d nodes up after %v", cl.Nodes(), time.Since(start).Round(time.Second))
	dbURL := cl.URL(cluster.Database)
	proctest.MustRun(t, proctest.ChildEnv("DATABASE_URL="+dbURL), nil, "migrate", "up")
	db := proctest.OpenDB(t, dbURL)
	if mode.control {
		// The old derivation, with no change to the product: a key row without an intent
		// derives its provider keys from its id and created_at (checkout.providerKey).
		if _, err := db.Exec(`
			CREATE FUNCTION failover_control_old_keys() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN IF NEW.key LIKE '` + oldKeyPrefix + `%' THEN NEW.intent := NULL; END IF; RETURN NEW; END $$;
			CREATE TRIGGER failover_control_old_keys BEFORE INSERT ON idempotency_keys
			   FOR EACH ROW EXECUTE FUNCTION failover_control_old_keys()`); err != nil {
			t.Fatalf("install the control's trigger: %v", err)
		}
	}
	secret := proctest.NewClientSecret(t, dbURL, "failover app")

	// The provider, with its ledger on the test's own Postgres, outside the cluster.
	ledgerURL := dbtest.NewURL(t)
	ledgerDB := proctest.OpenDB(t, ledgerURL)
	ports := proctest.FreePorts(t, 3)
	pspAddr := proctest.Addr(ports[2])
	psp := proctest.Start(t, proctest.ChildEnv("DATABASE_URL="+ledgerURL, "TEKRAR_PSP_ADDR="+pspAddr), nil, "psp")
	proctest.WaitUp(t, psp, "http://"+pspAddr, "/charges/none", 30*time.Second)

	// Two replicas on the cluster's several-host URL, each with its completer, restarted
	// if they die (which counts against the run: nothing here kills them).
	r := proctest.NewReplicas(t)
	for _, port := range ports[:2] {
		r.Add("http://"+proctest.Addr(port), proctest.ChildEnv(
			"DATABASE_URL="+dbURL, "TEKRAR_ADDR="+proctest.Addr(port), "TEKRAR_PSP_URL=http://"+pspAddr,
			"TEKRAR_LOG_LEVEL=warn", "TEKRAR_LEASE=2s", "TEKRAR_COMPLETER_INTERVAL=200ms",
			"TEKRAR_COMPLETER_GRACE=1s", "TEKRAR_PROVIDER_TIMEOUT=2s", "TEKRAR_DB_TIMEOUT=2s",
			"TEKRAR_SWEEP_INTERVAL=24h"), 60*time.Second)
	}
	supervise, stopSupervise := context.WithCancel(context.Background())
	defer stopSupervise()
	var bg sync.WaitGroup
	bg.Go(func() { r.Supervise(supervise) })

	// Load: retrying clients paying, and refunding some of what they paid.
	var counts failoverCounts
	var faultsDone atomic.Bool
	var nextAmount atomic.Int64
	nextAmount.Store(10000)
	histories := make([][]*ledgercheck.Intent, workers)
	c := proctest.NewHTTPClient()
	c.Timeout = 15 * time.Second
	var load sync.WaitGroup
	for w := range workers {
		load.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(w)))
			prefix := "fo-"
			if mode.control && w%2 == 0 {
				prefix = oldKeyPrefix
			}
			for i := 0; !faultsDone.Load(); i++ {
				pay := &ledgercheck.Intent{Kind: ledgercheck.KindPay, Key: fmt.Sprintf("%s%d-%d-%d", prefix, start.UnixNano(), w, i),
					Amount: nextAmount.Add(1), Token: "tok_visa"}
				if rng.IntN(10) == 0 {
					pay.Token = "tok_declined"
				}
				histories[w] = append(histories[w], pay)
				ack := untilOutcome(r, c, rng, w, pay, secret, time.Minute)
				time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // a customer's pace, not a storm
				if ack == nil || ack.Status != 201 || rng.IntN(3) != 0 {
					continue
				}
				refund := &ledgercheck.Intent{Kind: ledgercheck.KindRefund, Key: pay.Key + "-refund", Amount: pay.Amount / 4,
					Order: pay, OrderID: ledgercheck.PublicID(ack.Body)}
				histories[w] = append(histories[w], refund)
				untilOutcome(r, c, rng, w, refund, secret, time.Minute)
			}
		})
	}

	// Faults, one after another, each once the cluster is healthy again.
	var faultErr error
	func() {
		defer faultsDone.Store(true)
		if err := waitHealthy(ctx, cl); err != nil {
			faultErr = err
			return
		}
		for i := range faults {
			time.Sleep(2 * time.Second) // load on a healthy cluster between faults
			began := time.Now()
			kind := kinds[i%len(kinds)]
			if mode.control {
				kind = "lose"
			}
			inject := faultKinds[kind]
			fctx, fcancel := context.WithTimeout(ctx, 3*time.Minute)
			err := inject(fctx, cl, &counts)
			fcancel()
			healed := time.Now()
			if err == nil {
				err = waitHealthy(ctx, cl)
			}
			if err != nil {
				faultErr = fmt.Errorf("fault %d (%s): %w", i+1, kind, err)
				return
			}
			t.Logf("fault %d of %d (%s): %v, healthy %v later", i+1, faults, kind,
				healed.Sub(began).Round(100*time.Millisecond), time.Since(healed).Round(100*time.Millisecond))
		}
		time.Sleep(2 * time.Second) // load on the cluster as the faults left it
	}()
	load.Wait()
	loadDone := time.Now()
	if faultErr != nil {
		t.Fatalf("the cluster did not come back: %v", faultErr)
	}

	// Both replicas up on the last leader, every key settled by retries or the completer.
	for _, s := range r.List {
		proctest.WaitUntil(t, 60*time.Second, "server "+s.Base+" to be ready", func() bool {
			return !s.Proc().Exited() && proctest.Ready(s.Base)
		})
	}
	proctest.WaitUntil(t, 60*time.Second, "no key in progress", func() bool {
		return proctest.CountRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'`) == 0
	})

	// Late retries: every intent is sent once more with its key, after every failover, so
	// that an answer a client was given before a failover is compared with the one the
	// surviving database gives (and an intent whose client gave up gets its outcome).
	var all []*ledgercheck.Intent
	for _, h := range histories {
		all = append(all, h...)
	}
	late := make(chan *ledgercheck.Intent)
	var lateWG sync.WaitGroup
	for w := range workers {
		lateWG.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(1000+w)))
			for in := range late {
				if untilOutcome(r, c, rng, w, in, secret, 45*time.Second) == nil {
					t.Errorf("late retries of %s %s: no outcome within 45s, last %v", in.Kind, in.Key, in.Answers[len(in.Answers)-1])
				}
			}
		})
	}
	for _, in := range all {
		late <- in
	}
	close(late)
	lateWG.Wait()
	proctest.WaitUntil(t, 60*time.Second, "no key in progress after the late retries", func() bool {
		return proctest.CountRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'`) == 0
	})
	stopSupervise()
	bg.Wait()
	r.Stop()
	r.CheckOutput()

	// The checker.
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	l, err := ledgercheck.ReadLedger(rctx, ledgerDB)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledgercheck.ReadStore(rctx, db)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]*ledgercheck.Intent{}
	for _, in := range all {
		g := intentKeys
		if strings.HasPrefix(in.Key, oldKeyPrefix) {
			g = oldKeys
		}
		groups[g] = append(groups[g], in)
	}
	reps := map[string]ledgercheck.Report{}
	for g, ins := range groups {
		reps[g] = ledgercheck.Check(ins, l.Of(ins), st)
	}
	unplaced := ledgercheck.Check(all, l, ledgercheck.Store{}).UnmatchedCharges

	byStatus := map[string]int{}
	for _, in := range all {
		for _, a := range in.Answers {
			switch {
			case a.Err != "":
				byStatus["transport error"]++
			case a.Code != "":
				byStatus[fmt.Sprintf("%d %s", a.Status, a.Code)]++
			default:
				byStatus[strconv.Itoa(a.Status)]++
			}
		}
	}
	statuses := make([]string, 0, len(byStatus))
	for s := range byStatus {
		statuses = append(statuses, fmt.Sprintf("%s: %d", s, byStatus[s]))
	}
	slices.Sort(statuses)
	// One line per group that the closing note can quote, then the details.
	injected := fmt.Sprintf("failovers %d (leader killed %d, frozen past its TTL %d, switched over %d, rows lost on purpose %d), "+
		"writes acknowledged by a thawed old leader %d",
		counts.kills.Load()+counts.freezes.Load()+counts.switchovers.Load()+counts.losses.Load(),
		counts.kills.Load(), counts.freezes.Load(), counts.switchovers.Load(), counts.losses.Load(),
		counts.secondPrimaryWrites.Load())
	for _, g := range []string{oldKeys, intentKeys} {
		if rep, ok := reps[g]; ok {
			t.Logf("failover harness (%s, %s): %s; %v", mode.name, g, injected, rep)
		}
	}
	t.Logf("  %d clients, load %v, whole run %v; answers: %s", workers, loadDone.Sub(start).Round(time.Second),
		time.Since(start).Round(time.Second), strings.Join(statuses, ", "))
	for _, g := range []string{oldKeys, intentKeys} {
		for _, f := range reps[g].Findings {
			t.Logf("  %s: %s", g, f)
		}
	}
	if unplaced > 0 {
		t.Errorf("%d succeeded charges are of no payment of the run", unplaced)
	}
	if n := counts.secondPrimaryWrites.Load(); n > 0 {
		t.Errorf("a leader frozen past its TTL acknowledged %d writes once thawed, as a second primary", n)
	}
	return reps
}

// untilOutcome sends in with its key until an answer retrying cannot change, alternating
// the replicas, for at most d; it returns that answer, or nil when d ran out.
func untilOutcome(r *proctest.Replicas, c *http.Client, rng *rand.Rand, w int, in *ledgercheck.Intent, secret string, d time.Duration) *proctest.Answer {
	method, path, body := "POST", "/v1/orders", proctest.OrderJSONBody(in.Amount, in.Token)
	if in.Kind == ledgercheck.KindRefund {
		path = "/v1/orders/" + in.OrderID + "/refunds"
		body = fmt.Appendf(nil, `{"amount":%d,"reason":%q}`, in.Amount, ledgercheck.RefundReason(in.Key))
	}
	backoff := 50 * time.Millisecond
	for try, deadline := 0, time.Now().Add(d); time.Now().Before(deadline); try++ {
		base := r.List[(w+try)%len(r.List)].Base
		a := proctest.Record(proctest.Send(c, method, base+path, secret, body, "Idempotency-Key", in.Key, "Prefer", "wait=3"))
		in.Answers = append(in.Answers, a)
		if ledgercheck.Outcome(a) {
			return &in.Answers[len(in.Answers)-1]
		}
		time.Sleep(backoff/2 + time.Duration(rng.Int64N(int64(backoff))))
		backoff = min(2*backoff, time.Second)
	}
	return nil
}

// faultKinds are the faults a run injects, by the names TEKRAR_FAILOVER_KINDS takes; "lose"
// is the control run's.
var faultKinds = map[string]func(context.Context, *cluster.Cluster, *failoverCounts) error{
	"kill": killLeader, "freeze": freezeLeader, "switchover": switchover, "lose": loseRows,
}

// waitHealthy waits until every node runs, the leader takes writes and every replica
// streams (the synchronous one included), for at most two minutes.
func waitHealthy(ctx context.Context, cl *cluster.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		err := cl.Healthy(ctx)
		if err == nil {
			return nil
		}
		if proctest.Sleep(ctx, 300*time.Millisecond) != nil {
			return fmt.Errorf("the cluster is not healthy: %w", err)
		}
	}
}

// killLeader SIGKILLs the leader (Patroni and postgres, as a machine losing power), waits
// for another to take writes, and restarts the old one, which rejoins as a replica.
func killLeader(ctx context.Context, cl *cluster.Cluster, n *failoverCounts) error {
	old, err := cl.Leader(ctx)
	if err != nil {
		return err
	}
	if err := cl.Kill(old); err != nil {
		return err
	}
	n.kills.Add(1)
	if _, err := cl.WaitLeader(ctx, old); err != nil {
		return err
	}
	return cl.Restart(ctx, old)
}

// freezeLeader SIGSTOPs the leader past its TTL, waits for another to take writes, wakes
// the old one, and checks that it acknowledges no write as a second primary while it
// finds out it lost the lock.
func freezeLeader(ctx context.Context, cl *cluster.Cluster, n *failoverCounts) error {
	old, err := cl.Leader(ctx)
	if err != nil {
		return err
	}
	if err := cl.Freeze(old); err != nil {
		return err
	}
	n.freezes.Add(1)
	if _, err := cl.WaitLeader(ctx, old); err != nil {
		_ = cl.Thaw(old)
		return err
	}
	time.Sleep(time.Second) // the clients write on the new leader while the old one sleeps
	if err := cl.Thaw(old); err != nil {
		return err
	}
	n.secondPrimaryWrites.Add(int64(probeWrites(cl.SuperuserURL(old, "postgres"), 5*time.Second, func() bool {
		leader, err := cl.Leader(ctx)
		return err == nil && leader != old
	})))
	return nil
}

// switchover asks for a planned switchover.
func switchover(ctx context.Context, cl *cluster.Cluster, n *failoverCounts) error {
	if _, err := cl.Switchover(ctx); err != nil {
		return err
	}
	n.switchovers.Add(1)
	return nil
}

// loseRows makes the newest commits of the leader exist nowhere else, then kills it: the
// standbys are frozen for a few seconds under load (under asynchronous replication the
// leader goes on acknowledging commits, its WAL senders ended), the leader is SIGKILLed, and the standbys wake to
// elect one of them, which has no copy of those seconds. The old leader rejoins behind it,
// rewound.
func loseRows(ctx context.Context, cl *cluster.Cluster, n *failoverCounts) error {
	old, err := cl.Leader(ctx)
	if err != nil {
		return err
	}
	var frozen []int
	thaw := func() error {
		var errs []error
		for _, i := range frozen {
			errs = append(errs, cl.Thaw(i))
		}
		frozen = nil
		return errors.Join(errs...)
	}
	for i := range cl.Nodes() {
		if i == old {
			continue
		}
		if err := cl.Freeze(i); err != nil {
			return errors.Join(err, thaw())
		}
		frozen = append(frozen, i)
	}
	// A frozen standby's socket still takes what the leader sends, and reads it on waking:
	// ending the leader's WAL senders leaves every later commit on the leader alone.
	if err := endWALSenders(ctx, cl.SuperuserURL(old, "postgres")); err != nil {
		return errors.Join(err, thaw())
	}
	time.Sleep(3 * time.Second)
	if err := cl.Kill(old); err != nil {
		return errors.Join(err, thaw())
	}
	if err := thaw(); err != nil {
		return err
	}
	n.losses.Add(1)
	if _, err := cl.WaitLeader(ctx, old); err != nil {
		return err
	}
	return cl.Restart(ctx, old)
}

// endWALSenders terminates the WAL senders of the node at url.
func endWALSenders(ctx context.Context, url string) error {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_replication`); err != nil {
		return fmt.Errorf("end the leader's WAL senders: %w", err)
	}
	return nil
}

// probeWrites tries, for d, to commit a write on one node alone (a woken old leader), and
// returns how many commits it acknowledged while another node held the leader lock
// (another reports whether one does). A commit is waited for without a deadline of
// its own: cancelling a commit that waits for a synchronous standby makes Postgres report
// it committed, which is what this must not count. A commit that has not answered within
// a second counts as refused; its connection is left to the node's demotion.
func probeWrites(url string, d time.Duration, another func() bool) int {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return 0
	}
	// Not closed: a probe may still wait on it, and the node's demotion ends it.
	acked := 0
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		done := make(chan error, 1)
		go func() {
			_, err := db.Exec(`CREATE TABLE IF NOT EXISTS failover_probe (at timestamptz NOT NULL);
				INSERT INTO failover_probe VALUES (now())`)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil && another() {
				acked++
			}
		case <-time.After(time.Second):
		}
	}
	return acked
}
