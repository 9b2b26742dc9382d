package main

// The outbox end to end between real processes: two `tekrar serve` replicas take payments
// and refunds, write their events, deliver them to client webhook endpoints and send
// receipts by SMTP, while a random replica is killed with SIGKILL now and then.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// hookRequest is one request the merchant's receiver got, as it saw it.
type hookRequest struct {
	endpoint   int
	headerID   string // webhook-id
	bodyID     string // the event's id in the body
	start, end time.Time
	outcome    string // "failed" (500, nothing applied), "applied", "applied-hung", "duplicate", "bad"
}

// merchant is a client's webhook receiver: checkout/stdwebhook.Verify and Receive on its own
// Postgres, failing the first request of some events with 500 and answering the first
// request of others only after tekrar's attempt timed out (having applied it).
type merchant struct {
	db       *sqlx.DB
	mu       sync.Mutex
	verifier stdwebhook.Verifier
	log      []hookRequest
	seen     map[string]int
	srv      *httptest.Server
	inFlight atomic.Int64 // requests being handled now
	// skipDedup applies every delivery, duplicates too (to see the test fail).
	skipDedup bool
}

func newMerchant(t *testing.T, endpoint int) *merchant {
	t.Helper()
	m := &merchant{db: openDB(t, dbtest.NewURL(t)), seen: map[string]int{}}
	if _, err := m.db.Exec(stdwebhook.ReceiptsTable + `; CREATE TABLE applied (event_id text NOT NULL, type text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := hookRequest{endpoint: endpoint, headerID: r.Header.Get(stdwebhook.HeaderID), start: time.Now()}
		m.inFlight.Add(1)
		defer func() {
			m.inFlight.Add(-1)
			req.end = time.Now()
			m.mu.Lock()
			m.log = append(m.log, req)
			m.mu.Unlock()
		}()
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		v := m.verifier
		nth := m.seen[req.headerID]
		m.seen[req.headerID]++
		m.mu.Unlock()
		msg, err := v.Verify(r.Header, body)
		if err != nil {
			req.outcome = "bad"
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ev struct{ ID, Type string }
		_ = json.Unmarshal(body, &ev)
		req.bodyID = ev.ID
		h := fnv.New32a()
		h.Write([]byte(msg.ID))
		share := h.Sum32() % 10
		if nth == 0 && share == 0 { // the endpoint is down for this one
			req.outcome = "failed"
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		apply := func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO applied (event_id, type) VALUES ($1, $2)`, msg.ID, ev.Type)
			return err
		}
		var dup bool
		if m.skipDedup {
			tx, err := m.db.BeginTx(r.Context(), nil)
			if err == nil {
				err = apply(tx)
				if err == nil {
					err = tx.Commit()
				}
			}
			if err != nil {
				req.outcome = "failed"
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		} else if dup, err = stdwebhook.Receive(r.Context(), m.db.DB, msg, apply); err != nil {
			req.outcome = "failed"
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.outcome = "applied"
		if dup {
			req.outcome = "duplicate"
		}
		if nth == 0 && share == 1 { // applied, but answered too late: tekrar times out first
			req.outcome += "-hung"
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// TestOutboxLongRun: two `tekrar serve` replicas on one database deliver the events of
// payments (some declined) and refunds to two client webhook endpoints (a receiver that
// deduplicates by webhook-id, fails some first requests with 500 and answers some only
// after tekrar's timeout) and send receipts to a real SMTP server, while a random replica is
// SIGKILLed several times (during requests, event-writing transactions and deliveries) and
// started again. Then: one event per committed change and none else; every delivery
// succeeded and applied exactly once at each endpoint; every request carried its event's
// webhook-id; every duplicate the receiver saw follows a request whose success tekrar never
// recorded (a kill between send and record, a timeout); one receipt per paid or refunded
// order with an e-mail, each sent, and any second copy at the SMTP server has the same
// Message-ID. For a long run:
//
//	TEKRAR_OUTBOX_ORDERS=1500 TEKRAR_OUTBOX_KILLS=12 go test -count=1 -timeout 30m -run TestOutboxLongRun -v ./cmd/tekrar/
func TestOutboxLongRun(t *testing.T) {
	t.Parallel()
	orders := proctest.EnvSize(t, "TEKRAR_OUTBOX_ORDERS", 40)
	kills := proctest.EnvSize(t, "TEKRAR_OUTBOX_KILLS", 2)
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	mbox := receiptstest.New(t, "", "")
	env := []string{"TEKRAR_LOG_LEVEL=warn", "TEKRAR_OUTBOX_POLL=20ms", "TEKRAR_OUTBOX_RESCUE_AFTER=22s",
		"TEKRAR_LEASE=2s", "TEKRAR_COMPLETER_INTERVAL=500ms", "TEKRAR_COMPLETER_GRACE=1s",
		"TEKRAR_SECRETS_KEY=" + deliveries.NewSecretsKey(), "TEKRAR_WEBHOOKS_ALLOW_LOOPBACK=true",
		"TEKRAR_WEBHOOK_RETRY_BASE=200ms", "TEKRAR_SMTP_URL=smtp://" + mbox.Server.Addr()}
	ports := freePorts(t, 2)
	procs := make([]*proc, 2)
	bases := make([]string, 2)
	for i, port := range ports {
		procs[i], bases[i] = startServe(t, dbURL, port, env...)
	}
	secret := newClientSecret(t, dbURL, "outbox long run")
	c := newHTTPClient()

	// One endpoint registered through each replica, each with its own receiver and database.
	types := []string{"order.paid", "order.declined", "refund.created", "order.refunded"}
	merchants := make([]*merchant, 2)
	for i := range merchants {
		merchants[i] = newMerchant(t, i)
		typesJSON, _ := json.Marshal(types)
		r := mustSend(t, c, "POST", bases[i]+"/v1/webhook-endpoints", secret,
			[]byte(fmt.Sprintf(`{"url":%q,"event_types":%s}`, merchants[i].srv.URL+"/hooks", typesJSON)), "Content-Type", "application/json")
		var ep struct{ Secret string }
		if err := json.Unmarshal(r.Body, &ep); err != nil || r.Status != 201 {
			t.Fatalf("create endpoint: %d %s", r.Status, r.Body)
		}
		key, err := stdwebhook.ParseSecret(ep.Secret)
		if err != nil {
			t.Fatal(err)
		}
		merchants[i].mu.Lock()
		merchants[i].verifier = stdwebhook.Verifier{Keys: []stdwebhook.Key{key}}
		merchants[i].mu.Unlock()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// retry sends one request until it reaches a final answer, through either replica.
	retry := func(i int, what, path string, body []byte, key string, done func(response) bool) (response, bool) {
		for attempt := 0; ctx.Err() == nil; attempt++ {
			r, err := send(c, "POST", bases[(i+attempt)%2]+path, secret, body, "Idempotency-Key", key, "Prefer", "wait=5")
			if err == nil && done(r) {
				return r, true
			}
			if err == nil && !retryable(answer{Status: r.Status, Code: problemCode(r.Body)}) {
				t.Errorf("%s: unexpected answer %d %s", what, r.Status, r.Body)
				return r, false
			}
			_ = proctest.Sleep(ctx, 20*time.Millisecond)
		}
		t.Errorf("%s: no final answer", what)
		return response{}, false
	}
	var mu sync.Mutex
	refundsAsked := 0
	pay := func(i int) {
		token := "tok_visa"
		if i%5 == 2 {
			token = "tok_declined"
		}
		amount := int64(1000 + i*10)
		customer := ""
		if i%3 != 0 {
			customer = fmt.Sprintf(`,"customer":{"email":"buyer%d@example.com"}`, i)
		}
		body := []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":%d}],"amount":%d,"payment":{"card_token":%q}%s}`,
			amount, amount, token, customer))
		key := fmt.Sprintf("longrun-%d", i)
		r, ok := retry(i, "payment "+key, "/v1/orders", body, key, func(r response) bool {
			return final(answer{Status: r.Status, Code: problemCode(r.Body)})
		})
		if !ok || r.Status != 201 || i%4 != 1 {
			return
		}
		var o struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(r.Body, &o)
		refund := `{"amount":500,"reason":"one item returned"}`
		if i%8 == 1 {
			refund = fmt.Sprintf(`{"amount":%d,"reason":"all returned"}`, amount)
		}
		mu.Lock()
		refundsAsked++
		mu.Unlock()
		retry(i+1, "refund of "+key, "/v1/orders/"+o.ID+"/refunds", []byte(refund), key+"-refund", func(r response) bool {
			return r.Status == 201
		})
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				pay(i)
			}
		})
	}
	// The killer: every so many orders, SIGKILL a random replica and start it again a
	// moment later, while the others keep paying, refunding and delivering.
	var killTimes []time.Time
	deliveriesAtKills, keysAtKills := 0, 0
	killAt := map[int]bool{}
	for k := 1; k <= kills; k++ {
		killAt[k*orders/(kills+1)] = true
	}
	var restarts sync.WaitGroup
	for i := range orders {
		if killAt[i] {
			restarts.Wait() // the last victim is up again
			victim := rand.IntN(2)
			// What the kill can land in: open deliveries at the receivers (either replica's)
			// and payments or refunds between their claim and the statement that completes
			// them and writes their event.
			deliveriesAtKills += int(merchants[0].inFlight.Load() + merchants[1].inFlight.Load())
			keysAtKills += countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'`)
			if err := procs[victim].cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-procs[victim].done
			killTimes = append(killTimes, time.Now())
			restarts.Go(func() {
				_ = proctest.Sleep(ctx, 300*time.Millisecond)
				procs[victim], _ = startServe(t, dbURL, ports[victim], env...)
			})
		}
		work <- i
	}
	close(work)
	wg.Wait()
	restarts.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Every event dispatched (its row gone from the outbox queue, none discarded), every
	// delivery succeeded, every receipt sent.
	// A tenth of first requests hang for the attempt timeout, holding a delivery worker: the
	// backlog grows with the run.
	settled := func() bool {
		return countRows(t, db, `SELECT count(*) FROM outbox_queue`) == 0 &&
			countRows(t, db, `SELECT count(*) FROM webhook_deliveries WHERE state <> 'succeeded'`) == 0 &&
			countRows(t, db, `SELECT count(*) FROM receipts WHERE state <> 'sent'`) == 0
	}
	for deadline := time.Now().Add(2*time.Minute + time.Duration(orders)*100*time.Millisecond); !settled(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			var states []string
			if err := db.Select(&states, `
				SELECT 'job ' || kind || ' ' || state || ': ' || count(*) FROM river_job GROUP BY kind, state
				UNION ALL SELECT 'outbox event ' || CASE WHEN discarded_at IS NULL THEN 'waiting' ELSE 'discarded' END || ' ' ||
				       coalesce(last_error, '') || ': ' || count(*) FROM outbox_queue GROUP BY discarded_at IS NULL, last_error
				UNION ALL SELECT 'delivery ' || state || ' ' || coalesce(last_error, '') || ': ' || count(*) FROM webhook_deliveries GROUP BY state, last_error
				UNION ALL SELECT 'receipt ' || state || ' ' || coalesce(last_error, '') || ': ' || count(*) FROM receipts GROUP BY state, last_error`); err != nil {
				t.Fatal(err)
			}
			t.Fatalf("not every event dispatched, delivered and its receipt sent by the deadline:\n%s", strings.Join(states, "\n"))
		}
	}

	// Events: exactly one per committed change, none else.
	for _, check := range []struct{ what, q string }{
		{"orders whose order.paid events are not one if paid, none otherwise", `
			SELECT count(*) FROM orders o WHERE (CASE WHEN o.status IN ('paid', 'partially_refunded', 'refunded') THEN 1 ELSE 0 END)
			   <> (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.paid')`},
		{"orders whose order.declined events are not one if declined, none otherwise", `
			SELECT count(*) FROM orders o WHERE (CASE WHEN o.status = 'declined' THEN 1 ELSE 0 END)
			   <> (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.declined')`},
		{"orders whose refund.created events are not one per refund", `
			SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM refunds r WHERE r.order_id = o.id)
			   <> (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'refund.created')`},
		{"orders whose order.refunded events are not one per succeeded refund", `
			SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM refunds r WHERE r.order_id = o.id AND r.status = 'succeeded')
			   <> (SELECT count(*) FROM outbox_events e WHERE e.order_id = o.id AND e.type = 'order.refunded')`},
		{"refunds not succeeded", `SELECT count(*) FROM refunds WHERE status <> 'succeeded'`},
		{"events of other types", `SELECT count(*) FROM outbox_events WHERE type::text NOT IN ('order.paid', 'order.declined', 'refund.created', 'order.refunded')`},
		{"events without an order", `SELECT count(*) FROM outbox_events WHERE order_id IS NULL`},
		{"keys not completed", `SELECT count(*) FROM idempotency_keys WHERE state <> 'completed'`},
	} {
		if n := countRows(t, db, check.q); n != 0 {
			t.Errorf("%d %s", n, check.what)
		}
	}
	paid := countRows(t, db, `SELECT count(*) FROM orders WHERE status IN ('paid', 'partially_refunded', 'refunded')`)
	declined := countRows(t, db, `SELECT count(*) FROM orders WHERE status = 'declined'`)
	refunds := countRows(t, db, `SELECT count(*) FROM refunds`)
	if paid+declined != orders || refunds != refundsAsked {
		t.Errorf("%d paid + %d declined orders of %d, %d refunds of %d asked", paid, declined, orders, refunds, refundsAsked)
	}
	events := countRows(t, db, `SELECT count(*) FROM outbox_events`)

	// Deliveries: one per event and endpoint, each applied exactly once at its endpoint.
	var eventIDs []string
	if err := db.Select(&eventIDs, `SELECT id FROM outbox_events ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, `SELECT count(*) FROM webhook_deliveries`); n != 2*events {
		t.Errorf("%d deliveries for %d events to 2 endpoints", n, events)
	}
	lost := 0
	for i, m := range merchants {
		var applied []struct {
			ID string `db:"event_id"`
			N  int    `db:"n"`
		}
		if err := m.db.Select(&applied, `SELECT event_id, count(*) AS n FROM applied GROUP BY event_id`); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, a := range applied {
			got[a.ID] = a.N
		}
		for _, id := range eventIDs {
			switch got[id] {
			case 1:
			case 0:
				lost++
				t.Errorf("endpoint %d: event %s never applied", i, id)
			default:
				t.Errorf("endpoint %d: event %s applied %d times", i, id, got[id])
			}
			delete(got, id)
		}
		for id := range got {
			t.Errorf("endpoint %d: applied %s, which is no event of tekrar's", i, id)
		}
		if n := countRows(t, m.db, `SELECT count(*) FROM webhook_receipts`); n != events {
			t.Errorf("endpoint %d: %d rows in its dedup table, want %d (one per event)", i, n, events)
		}
	}

	// The receivers' request logs against tekrar's record of attempts.
	type attemptRow struct {
		Endpoint int    `db:"endpoint"`
		EventID  string `db:"event_id"`
		Total    int    `db:"total"`
		OK       int    `db:"ok"`
	}
	var recorded []attemptRow
	if err := db.Select(&recorded, `
		SELECT (SELECT count(*) FROM webhook_endpoints e2 WHERE e2.id < d.endpoint_id)::int AS endpoint, d.event_id,
		       count(a.id)::int AS total, count(a.id) FILTER (WHERE a.status_code BETWEEN 200 AND 299)::int AS ok
		  FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id
		 GROUP BY d.id, d.endpoint_id, d.event_id`); err != nil {
		t.Fatal(err)
	}
	byDelivery := map[string]attemptRow{}
	attempts := 0
	for _, a := range recorded {
		byDelivery[strconv.Itoa(a.Endpoint)+"/"+a.EventID] = a
		attempts += a.Total
		if a.OK != 1 {
			t.Errorf("delivery of %s to endpoint %d: %d attempts recorded succeeded, want 1", a.EventID, a.Endpoint, a.OK)
		}
	}
	requests := map[string][]hookRequest{}
	total := 0
	for _, m := range merchants {
		m.mu.Lock()
		for _, r := range m.log {
			total++
			if r.headerID != r.bodyID || r.outcome == "bad" {
				t.Errorf("endpoint %d: a request with webhook-id %q carried event %q (%s)", r.endpoint, r.headerID, r.bodyID, r.outcome)
			}
			k := strconv.Itoa(r.endpoint) + "/" + r.headerID
			requests[k] = append(requests[k], r)
		}
		m.mu.Unlock()
	}
	// Each duplicate follows an earlier request of the same event whose success tekrar did
	// not record: one it timed out on (the receiver hung), or one whose answer died with
	// a killed replica (more requests arrived than attempts were recorded).
	dupAfterCrash, dupAfterTimeout, unrecorded := 0, 0, 0
	for k, rs := range requests {
		a, ok := byDelivery[k]
		if !ok {
			t.Errorf("requests for %s, which tekrar has no delivery of", k)
			continue
		}
		missing := len(rs) - a.Total
		if missing < 0 {
			t.Errorf("%s: %d requests received, %d attempts recorded", k, len(rs), a.Total)
			continue
		}
		unrecorded += missing
		answered := 0
		for j, r := range rs {
			if r.outcome == "applied" || r.outcome == "duplicate" {
				answered++
			}
			if r.outcome != "duplicate" && r.outcome != "duplicate-hung" {
				continue
			}
			prev := rs[j-1]
			if (prev.outcome == "applied-hung" || prev.outcome == "duplicate-hung") && prev.end.Sub(prev.start) >= deliveries.AttemptTimeout-time.Second {
				dupAfterTimeout++
			} else {
				dupAfterCrash++
				if !nearKill(killTimes, prev) {
					t.Errorf("%s: duplicate request after a request (%s, %s..%s) that tekrar neither timed out on nor could have lost to a kill",
						k, prev.outcome, prev.start.Format(time.StampMilli), prev.end.Format(time.StampMilli))
				}
			}
		}
		// Every 2xx answer but the one recorded was lost to a kill.
		if answered-1 > missing {
			t.Errorf("%s: %d 2xx answers, one recorded and only %d requests unrecorded", k, answered, missing)
		}
	}
	for _, id := range eventIDs {
		for i := range merchants {
			if len(requests[strconv.Itoa(i)+"/"+id]) == 0 {
				t.Errorf("event %s never reached endpoint %d", id, i)
			}
		}
	}

	// Receipts: one per paid or refunded order with an e-mail, each sent; duplicates at the
	// SMTP server only as the same Message-ID.
	wantReceipts := countRows(t, db, `
		SELECT count(*) FROM outbox_events e JOIN orders o ON o.id = e.order_id
		 WHERE e.type IN ('order.paid', 'order.refunded') AND coalesce(o.customer_email, '') <> ''`)
	var messageIDs []string
	if err := db.Select(&messageIDs, `SELECT message_id FROM receipts WHERE state = 'sent'`); err != nil {
		t.Fatal(err)
	}
	if len(messageIDs) != wantReceipts || countRows(t, db, `SELECT count(*) FROM receipts`) != wantReceipts {
		t.Errorf("%d receipts sent, want %d (one per order.paid and order.refunded of an order with an e-mail)", len(messageIDs), wantReceipts)
	}
	mails := map[string]int{}
	msgs := mbox.Messages()
	for _, msg := range msgs {
		m, err := mail.ReadMessage(bytes.NewReader(msg.Data))
		if err != nil {
			t.Fatalf("a message the SMTP server accepted: %v", err)
		}
		mails[m.Header.Get("Message-ID")]++
	}
	duplicateMails := 0
	for _, id := range messageIDs {
		n := mails["<"+id+">"] + mails[id]
		if n == 0 {
			t.Errorf("receipt %s recorded sent, never reached the SMTP server", id)
		}
		duplicateMails += max(n-1, 0)
		delete(mails, "<"+id+">")
		delete(mails, id)
	}
	for id, n := range mails {
		t.Errorf("%d messages with Message-ID %q, which no receipt has", n, id)
	}
	if lost != 0 {
		t.Errorf("lost %d", lost)
	}
	t.Logf("orders %d (paid %d, declined %d), refunds %d, events %d, deliveries %d, attempts %d (recorded) + %d (lost to kills), "+
		"retries %d, requests received %d, duplicates received %d (after crashes %d, after timeouts %d), receipts sent %d, "+
		"SMTP messages %d, duplicate e-mails (same Message-ID) %d, kills %d (deliveries open at the receivers %d, payments and refunds in flight %d), lost %d",
		orders, paid, declined, refunds, events, 2*events, attempts, unrecorded, attempts+unrecorded-2*events, total,
		dupAfterCrash+dupAfterTimeout, dupAfterCrash, dupAfterTimeout, len(messageIDs), len(msgs), duplicateMails, len(killTimes), deliveriesAtKills, keysAtKills, lost)
}

// nearKill reports whether a request could have been lost with a killed replica: one was
// killed after the request began and not long after it was answered (before tekrar could
// record the answer). "Not long" is generous (15 s) because recording an answer can wait
// on a loaded machine; the check is that every duplicate has a kill or a timeout to explain
// it, not how quickly tekrar records.
func nearKill(kills []time.Time, r hookRequest) bool {
	for _, k := range kills {
		if !k.Before(r.start) && k.Before(r.end.Add(15*time.Second)) {
			return true
		}
	}
	return false
}
