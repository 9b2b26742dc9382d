package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestOutboxSurvivesAKilledReplica: two `tekrar serve` replicas take payments; one is killed
// with SIGKILL mid-run (with whatever requests, transactions and River jobs it had in
// flight) and started again. Every order that committed paid has exactly one order.paid
// event, no other order has one, every event has exactly one dispatch job, and every
// dispatch job completes: those the dead process held are rescued and run by the others.
func TestOutboxSurvivesAKilledReplica(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := []string{"TEKRAR_LOG_LEVEL=warn", "TEKRAR_OUTBOX_POLL=20ms", "TEKRAR_OUTBOX_RESCUE_AFTER=2s",
		"TEKRAR_LEASE=2s", "TEKRAR_COMPLETER_INTERVAL=500ms", "TEKRAR_COMPLETER_GRACE=1s"}
	ports := freePorts(t, 2)
	procs := make([]*proc, 2)
	bases := make([]string, 2)
	for i, port := range ports {
		procs[i], bases[i] = startServe(t, dbURL, port, env...)
	}
	secret := newClientSecret(t, dbURL, "outbox app")
	c := newHTTPClient()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const payments, workers = 400, 16
	var mu sync.Mutex
	outcomes := map[int]answer{}
	pay := func(i int) {
		key := fmt.Sprintf("outbox-%d", i)
		for attempt := 0; ctx.Err() == nil; attempt++ {
			r, err := send(c, "POST", bases[(i+attempt)%2]+"/v1/orders", secret, orderJSONBody(int64(1000+i), "tok_visa"),
				"Idempotency-Key", key, "Prefer", "wait=5")
			a := answer{Status: r.Status, Code: problemCode(r.Body)}
			if err != nil {
				a.Err = err.Error()
			}
			if final(a) {
				mu.Lock()
				outcomes[i] = a
				mu.Unlock()
				return
			}
			if !retryable(a) {
				t.Errorf("payment %d: unexpected answer %d %s", i, r.Status, r.Body)
				return
			}
			_ = proctest.Sleep(ctx, 20*time.Millisecond) // the client's pause before its retry
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				pay(i)
			}
		})
	}
	var runningAtKill int
	for i := range payments {
		switch i {
		case payments / 3:
			runningAtKill = countRows(t, db, `SELECT count(*) FROM river_job WHERE state = 'running'`)
			if err := procs[0].cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-procs[0].done
		case 2 * payments / 3:
			procs[0], _ = startServe(t, dbURL, ports[0], env...)
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if len(outcomes) != payments {
		t.Fatalf("%d of %d payments reached an outcome", len(outcomes), payments)
	}
	t.Logf("dispatch jobs running when the replica was killed: %d", runningAtKill)

	paid := countRows(t, db, `SELECT count(*) FROM orders WHERE status = 'paid'`)
	if paid < payments/2 {
		t.Fatalf("only %d orders paid", paid)
	}
	if n := countRows(t, db, `SELECT count(*) FROM orders o
		 WHERE (o.status = 'paid') <> (SELECT count(*) = 1 FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.paid')`); n != 0 {
		t.Errorf("%d orders whose order.paid events do not match their status (one per paid order, none otherwise)", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM outbox_events e
		 WHERE (SELECT count(*) FROM river_job j WHERE j.kind = 'outbox_dispatch' AND j.args->>'event_id' = e.id) <> 1`); n != 0 {
		t.Errorf("%d events without exactly one dispatch job", n)
	}
	waitUntil(t, 2*time.Minute, "every dispatch job to complete", func() bool {
		return countRows(t, db, `SELECT count(*) FROM river_job WHERE kind = 'outbox_dispatch' AND state <> 'completed'`) == 0
	})
	if n := countRows(t, db, `SELECT count(*) FROM river_job WHERE kind = 'outbox_dispatch'`); n != paid {
		t.Errorf("%d dispatch jobs for %d paid orders", n, paid)
	}
}
