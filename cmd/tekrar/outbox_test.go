package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// TestOutboxSurvivesAKilledReplica: two `tekrar serve` replicas take payments; one is killed
// with SIGKILL mid-run (with whatever requests, transactions and dispatches of events it had
// in flight) and started again. Every order that committed paid has exactly one order.paid
// event, no other order has one, and every event is dispatched, none given up on: the
// outbox queue ends empty (the rows of a batch the dead process held came back when its
// transaction died with it, and the others dispatched them), and each event's effect, its
// receipt, was made once.
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
			r, err := send(c, "POST", bases[(i+attempt)%2]+"/v1/orders", secret, outboxOrderBody(i),
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
	var atKill outboxQueueState
	for i := range payments {
		switch i {
		case payments / 3:
			atKill = readOutboxQueue(t, db)
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
	t.Logf("events not yet dispatched when the replica was killed: %d, of them held by a dispatch in flight (either replica's): %d",
		atKill.Waiting, atKill.Held)

	paid := countRows(t, db, `SELECT count(*) FROM orders WHERE status = 'paid'`)
	if paid < payments/2 {
		t.Fatalf("only %d orders paid", paid)
	}
	if n := countRows(t, db, `SELECT count(*) FROM orders o
		 WHERE (o.status = 'paid') <> (SELECT count(*) = 1 FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.paid')`); n != 0 {
		t.Errorf("%d orders whose order.paid events do not match their status (one per paid order, none otherwise)", n)
	}
	// Dispatched: no row of the queue left, none given up on (discarded). A row that is
	// gone says only that its dispatch committed; the receipts below say that it was made,
	// once per event.
	waitUntil(t, 2*time.Minute, "every event to be dispatched", func() bool {
		return countRows(t, db, `SELECT count(*) FROM outbox_queue WHERE discarded_at IS NULL`) == 0
	})
	if n := countRows(t, db, `SELECT count(*) FROM outbox_queue`); n != 0 {
		var errs []string
		if err := db.Select(&errs, `SELECT event_id || ' after ' || attempts || ' attempts: ' || coalesce(last_error, '')
			FROM outbox_queue ORDER BY event_id LIMIT 5`); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%d events given up on (discarded), not dispatched:\n%s", n, strings.Join(errs, "\n"))
	}
	if n := countRows(t, db, `SELECT count(*) FROM outbox_events e
		 WHERE e.type = 'order.paid' AND (SELECT count(*) FROM receipts r WHERE r.event_id = e.id) <> 1`); n != 0 {
		t.Errorf("%d order.paid events without exactly one receipt (their dispatch's effect)", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM receipts`); n != paid {
		t.Errorf("%d receipts for %d paid orders", n, paid)
	}
}

// outboxOrderBody is payment i's order: the body of orderJSONBody with a customer e-mail,
// so that the dispatch of its order.paid event records a receipt (kept: no SMTP server is
// configured), an effect to count per event.
func outboxOrderBody(i int) []byte {
	amount := int64(1000 + i)
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":%d}],"amount":%d,`+
		`"customer":{"email":"buyer%d@example.com"},"payment":{"card_token":"tok_visa"}}`, amount, amount, i))
}

// outboxQueueState is what the outbox queue holds at one moment: the events not yet
// dispatched (rows not discarded), and those of them a dispatch in flight holds (rows
// locked by a transaction that deleted them and has not committed).
type outboxQueueState struct {
	Waiting int `db:"waiting"`
	Held    int `db:"held"`
}

// readOutboxQueue reads the queue in one statement. The rows it can lock (FOR KEY SHARE
// SKIP LOCKED, for the statement alone) are those no dispatch holds: a dispatcher's claim
// skips them for that moment and takes them the next.
func readOutboxQueue(t testing.TB, db *sqlx.DB) outboxQueueState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s outboxQueueState
	if err := db.GetContext(ctx, &s, `
		SELECT count(*) AS waiting,
		       count(*) - (SELECT count(*) FROM (SELECT 1 FROM outbox_queue WHERE discarded_at IS NULL
		                                           FOR KEY SHARE SKIP LOCKED) free) AS held
		  FROM outbox_queue WHERE discarded_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	return s
}
