package main

// The provider's webhooks between real processes: a `tekrar psp` whose answers get lost,
// whose events arrive twice, late and out of order, and `tekrar serve` replicas receiving
// them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/webhook"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// webhookStack is a psp process and two serve replicas on one database, sharing a webhook
// secret; the psp sends its webhooks to the first replica when hooks is set.
type webhookStack struct {
	db      *sqlx.DB
	secret  string
	pspBase string
	bases   []string
	client  string // an API client's secret
}

func startWebhookStack(t *testing.T, pspArgs ...string) *webhookStack {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	s := &webhookStack{db: openDB(t, dbURL), secret: webhook.NewSecret()}
	ports := freePorts(t, 3)
	s.pspBase = "http://" + addrOf(ports[2])
	s.bases = []string{"http://" + addrOf(ports[0]), "http://" + addrOf(ports[1])}
	env := []string{"DATABASE_URL=" + dbURL, "TEKRAR_PSP_ADDR=" + addrOf(ports[2]), "TEKRAR_PSP_WEBHOOK_SECRET=" + s.secret}
	if len(pspArgs) > 0 {
		env = append(env, "TEKRAR_PSP_WEBHOOK_URL="+s.bases[0]+"/webhooks/psp")
	}
	p := startTekrar(t, childEnv(env...), nil, append([]string{"psp"}, pspArgs...)...)
	waitUp(t, p, s.pspBase, "/charges/none", 30*time.Second)
	for _, port := range ports[:2] {
		startServe(t, dbURL, port, "TEKRAR_LOG_LEVEL=warn", "TEKRAR_PSP_URL="+s.pspBase,
			"TEKRAR_PSP_WEBHOOK_SECRET="+s.secret, "TEKRAR_PROVIDER_TIMEOUT=2s",
			"TEKRAR_COMPLETER_INTERVAL=500ms", "TEKRAR_COMPLETER_GRACE=2s", "TEKRAR_LEASE=3s")
	}
	s.client = newClientSecret(t, dbURL, "webhook app")
	return s
}

// The same event delivered 50 times at once, spread over two replicas: recorded once,
// applied once, every delivery acknowledged; the order its charge belongs to is paid once.
func TestWebhookStormOnTwoReplicas(t *testing.T) {
	t.Parallel()
	s := startWebhookStack(t) // the psp sends nothing itself: the test delivers
	c := newHTTPClient()
	body := orderJSONBody(9000, "tok_timeout")
	r := mustSend(t, c, "POST", s.bases[0]+"/v1/orders", s.client, body, "Idempotency-Key", "storm-lost")
	problemOf(t, r, 503, "payment_pending")

	var ch struct {
		ID, Key, Description string
		Amount               int64
	}
	row := s.db.QueryRowx(`SELECT id, key, description, amount FROM psp_charges WHERE status = 'succeeded'`)
	if err := row.Scan(&ch.ID, &ch.Key, &ch.Description, &ch.Amount); err != nil {
		t.Fatal(err)
	}
	ev, err := json.Marshal(psp.Event{ID: "evt_storm_" + ch.ID, Type: psp.EventChargeSucceeded, Created: time.Now().UTC(),
		Data: psp.EventData{ChargeID: ch.ID, ChargeKey: ch.Key, Description: ch.Description, Sequence: 1,
			Amount: ch.Amount, Currency: "TRY", Status: psp.StatusSucceeded, CardBrand: "visa", CardLast4: "4242"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := webhook.ParseSecret(s.secret)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	outcomes := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest("POST", s.bases[i%2]+"/webhooks/psp", bytes.NewReader(ev))
			req.Header = webhook.Headers("evt_storm_"+ch.ID, time.Now(), ev, k)
			resp, err := c.Do(req)
			if err != nil {
				outcomes[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			var out struct {
				Outcome string `json:"outcome"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&out)
			outcomes[i] = fmt.Sprintf("%d %s", resp.StatusCode, out.Outcome)
		})
	}
	close(start)
	wg.Wait()
	got := map[string]int{}
	for _, o := range outcomes {
		got[o]++
	}
	if got["200 applied"] != 1 || got["200 duplicate"] != n-1 {
		t.Fatalf("outcomes %v, want one applied and %d duplicates", got, n-1)
	}
	for q, want := range map[string]int{
		`SELECT count(*) FROM provider_events`:                              1,
		`SELECT deliveries FROM provider_events`:                            n,
		`SELECT count(*) FROM orders WHERE status = 'paid'`:                 1,
		`SELECT count(*) FROM payments`:                                     1,
		`SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`:       1,
		`SELECT count(*) FROM idempotency_keys WHERE response_status = 201`: 1,
	} {
		if got := countRows(t, s.db, q); got != want {
			t.Errorf("%s = %d, want %d", q, got, want)
		}
	}
	replay := mustSend(t, c, "POST", s.bases[1]+"/v1/orders", s.client, body, "Idempotency-Key", "storm-lost")
	if replay.Status != 201 || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry: %d %s", replay.Status, replay.Body)
	}
}

// A run of the sandbox sending its webhooks, a third of them twice and a third late (so out
// of order), while clients pay (some answers lost), refund through tekrar, and the
// dashboard refunds and disputes behind tekrar's back. When every event is delivered, tekrar
// recorded each exactly once, knows every charge's newest state, and every lost answer ended
// paid once. For a long run:
//
//	TEKRAR_WEBHOOK_ORDERS=2000 go test -run TestSandboxWebhooksDuplicatedAndReordered -v ./cmd/tekrar/
func TestSandboxWebhooksDuplicatedAndReordered(t *testing.T) {
	t.Parallel()
	s := startWebhookStack(t, "--webhook-duplicate", "0.3", "--webhook-delay", "0.3", "--webhook-delay-for", "700ms")
	c := newHTTPClient()
	orders := crashSize(t, "TEKRAR_WEBHOOK_ORDERS", 40) // a long run: TEKRAR_WEBHOOK_ORDERS=2000
	var mu sync.Mutex
	lost := map[string][]byte{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < orders; i += 4 {
				token := "tok_visa"
				switch i % 8 {
				case 3:
					token = "tok_timeout"
				case 5:
					token = "tok_declined"
				}
				key := fmt.Sprintf("run-%d", i)
				body := orderJSONBody(int64(1000+i*10), token)
				r, err := send(c, "POST", s.bases[i%2]+"/v1/orders", s.client, body, "Idempotency-Key", key)
				if err != nil {
					t.Errorf("order %d: %v", i, err)
					continue
				}
				switch {
				case r.Status == 503:
					mu.Lock()
					lost[key] = body
					mu.Unlock()
				case r.Status == 201 && i%4 == 0:
					var o struct {
						ID string `json:"id"`
					}
					_ = json.Unmarshal(r.Body, &o)
					rr, err := send(c, "POST", s.bases[(i+1)%2]+"/v1/orders/"+o.ID+"/refunds", s.client,
						[]byte(`{"amount":500,"reason":"one item returned"}`), "Idempotency-Key", key+"-refund")
					if err != nil || rr.Status != 201 {
						t.Errorf("refund of %s: %v %d %s", key, err, rr.Status, rr.Body)
					}
				}
			}
		})
	}
	wg.Wait()
	// Behind tekrar's back: dashboard refunds and disputes on some paid charges.
	var charges []string
	if err := s.db.Select(&charges, `SELECT id FROM psp_charges WHERE status = 'succeeded' AND refunded_amount = 0 ORDER BY seq LIMIT 6`); err != nil {
		t.Fatal(err)
	}
	for i, id := range charges {
		path, body := "/dashboard/charges/"+id+"/refunds", `{"amount":100,"reason":"goodwill"}`
		if i%2 == 1 {
			path, body = "/dashboard/charges/"+id+"/disputes", `{"amount":200,"reason":"not received"}`
		}
		if r, err := send(c, "POST", s.pspBase+path, "", []byte(body)); err != nil || r.Status != 200 {
			t.Fatalf("dashboard %s: %v %d %s", path, err, r.Status, r.Body)
		}
	}

	waitFor(t, 60*time.Second+time.Duration(orders)*50*time.Millisecond, "every event delivered", func() bool {
		return countRows(t, s.db, `SELECT count(*) FROM psp_events WHERE delivered_at IS NULL`) == 0
	})
	// The lost answers: each retried once more, after the webhooks (or the completer) settled it.
	for key, body := range lost {
		var r response
		waitFor(t, 60*time.Second, "the lost answer of "+key, func() bool {
			var err error
			r, err = send(c, "POST", s.bases[rand.IntN(2)]+"/v1/orders", s.client, body, "Idempotency-Key", key, "Prefer", "wait=5")
			if err != nil || r.Status != 201 {
				t.Logf("retry of %s: %v %d %s", key, err, r.Status, r.Body)
			}
			return err == nil && r.Status == 201
		})
		if !strings.Contains(string(r.Body), `"status":"paid"`) {
			t.Errorf("%s: %s", key, r.Body)
		}
	}

	events := countRows(t, s.db, `SELECT count(*) FROM psp_events`)
	recorded := countRows(t, s.db, `SELECT count(*) FROM provider_events`)
	deliveries := countRows(t, s.db, `SELECT coalesce(sum(deliveries), 0) FROM provider_events`)
	stale := countRows(t, s.db, `SELECT count(*) FROM provider_events WHERE outcome = 'stale'`)
	if recorded != events {
		t.Errorf("tekrar recorded %d events, the provider sent %d", recorded, events)
	}
	if n := countRows(t, s.db, `SELECT count(*) FROM psp_events e WHERE NOT EXISTS (SELECT 1 FROM provider_events p WHERE p.event_id = e.id)`); n != 0 {
		t.Errorf("%d events never recorded", n)
	}
	if n := countRows(t, s.db, `
		SELECT count(*) FROM psp_charges ch
		  LEFT JOIN provider_charges pc ON pc.charge_id = ch.id
		 WHERE ch.status <> 'canceled'
		   AND (pc.charge_id IS NULL OR pc.refunded <> ch.refunded_amount OR pc.status <> ch.status
		        OR pc.last_sequence <> (SELECT max(seq) FROM psp_events e WHERE e.charge_id = ch.id))`); n != 0 {
		t.Errorf("%d charges whose newest state tekrar does not know", n)
	}
	if n := countRows(t, s.db, `
		SELECT count(*) FROM psp_charges ch JOIN payments p ON p.provider_charge_id = ch.id
		  JOIN orders o ON o.id = p.order_id
		 WHERE o.refunded_amount <> ch.refunded_amount`); n != 0 {
		t.Errorf("%d orders whose refunded amount is not the provider's (dashboard refunds must appear)", n)
	}
	if n := countRows(t, s.db, `SELECT count(*) FROM orders WHERE status = 'disputed'`); n != len(charges)/2 {
		t.Errorf("%d orders disputed, want %d", n, len(charges)/2)
	}
	if n := countRows(t, s.db, `SELECT count(*) FROM provider_charges WHERE disputed`); n != len(charges)/2 {
		t.Errorf("%d disputed charges known, want %d", n, len(charges)/2)
	}
	if n := countRows(t, s.db, `
		SELECT count(*) FROM psp_charges ch WHERE ch.status = 'succeeded'
		   AND (SELECT count(*) FROM payments p WHERE p.provider_charge_id = ch.id) <> 1`); n != 0 {
		t.Errorf("%d succeeded charges without exactly one payment", n)
	}
	t.Logf("events sent %d, deliveries received %d (duplicates absorbed %d), applied out of order as stale %d, lost answers settled %d",
		events, deliveries, deliveries-recorded, stale, len(lost))
}

// A replica dies (exit, as abruptly as a kill) after writing a provider event and its effect
// but before committing: nothing of it stays, and the redelivery to the other replica
// applies it once.
func TestWebhookKilledWhileApplying(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	secret := webhook.NewSecret()
	ports := freePorts(t, 2)
	common := []string{"TEKRAR_LOG_LEVEL=warn", "TEKRAR_PSP_WEBHOOK_SECRET=" + secret}
	doomed, baseA := startServe(t, dbURL, ports[0], append(common, "TEKRAR_CRASH_AT=inbox_before_commit", "TEKRAR_CRASH_RATE=1")...)
	_, baseB := startServe(t, dbURL, ports[1], common...)
	k, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := json.Marshal(psp.Event{ID: "evt_kill", Type: psp.EventRefundSucceeded, Created: time.Now().UTC(),
		Data: psp.EventData{ChargeID: "ch_kill", ChargeKey: "pk_kill", Sequence: 2, Amount: 900, Currency: "TRY",
			Status: psp.StatusSucceeded, RefundedAmount: 300}})
	post := func(base string) (int, error) {
		req, _ := http.NewRequest("POST", base+"/webhooks/psp", bytes.NewReader(ev))
		req.Header = webhook.Headers("evt_kill", time.Now(), ev, k)
		resp, err := newHTTPClient().Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if _, err := post(baseA); err == nil {
		t.Fatal("the doomed replica answered")
	}
	if code := doomed.wait(t, 10*time.Second); code != 3 {
		t.Fatalf("the doomed replica exited %d, want 3 (its crash point)", code)
	}
	if n := countRows(t, db, `SELECT count(*) FROM provider_events`) + countRows(t, db, `SELECT count(*) FROM provider_charges`); n != 0 {
		t.Fatalf("%d rows survived the crash", n)
	}
	if status, err := post(baseB); err != nil || status != 200 {
		t.Fatalf("the redelivery: %d %v", status, err)
	}
	if n := countRows(t, db, `SELECT count(*) FROM provider_events WHERE outcome = 'applied' AND deliveries = 1`); n != 1 {
		t.Fatal("the redelivery was not applied exactly once")
	}
	if n := countRows(t, db, `SELECT refunded FROM provider_charges WHERE charge_id = 'ch_kill'`); n != 300 {
		t.Errorf("refunded %d, want 300", n)
	}
}
