package main

// The provider's webhooks between real processes: a `tekrar psp` whose answers get lost,
// whose events arrive twice, late and out of order, and `tekrar serve` replicas receiving
// them.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/proctest"
)

// webhookStack is a psp process and two serve replicas on one database, sharing a webhook
// secret; the psp sends its webhooks to the first replica when hooks is set.
type webhookStack struct {
	db      *sqlx.DB
	dbURL   string
	secret  string
	pspBase string
	bases   []string
	client  string // an API client's secret
}

func startWebhookStack(t *testing.T, pspArgs ...string) *webhookStack {
	t.Helper()
	return startWebhookStackWith(t, nil, pspArgs...)
}

// startWebhookStackWith is startWebhookStack with more settings for the serve replicas.
func startWebhookStackWith(t *testing.T, serveEnv []string, pspArgs ...string) *webhookStack {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	s := &webhookStack{db: openDB(t, dbURL), dbURL: dbURL, secret: stdwebhook.NewSecret()}
	ports := freePorts(t, 3)
	s.pspBase = "http://" + addrOf(ports[2])
	s.bases = []string{"http://" + addrOf(ports[0]), "http://" + addrOf(ports[1])}
	env := []string{"DATABASE_URL=" + dbURL, "TEKRAR_PSP_ADDR=" + addrOf(ports[2]), "TEKRAR_PSP_WEBHOOK_SECRET=" + s.secret}
	if len(pspArgs) > 0 {
		env = append(env, "TEKRAR_PSP_WEBHOOK_URL="+s.bases[0]+"/webhooks/psp")
	}
	p := startTekrar(t, childEnv(env...), nil, append([]string{"psp"}, pspArgs...)...)
	proctest.WaitUp(t, p.Proc, s.pspBase, "/charges/none", 30*time.Second)
	for _, port := range ports[:2] {
		startServe(t, dbURL, port, append([]string{"TEKRAR_LOG_LEVEL=warn", "TEKRAR_PSP_URL=" + s.pspBase,
			"TEKRAR_PSP_WEBHOOK_SECRET=" + s.secret, "TEKRAR_PROVIDER_TIMEOUT=2s",
			"TEKRAR_COMPLETER_INTERVAL=500ms", "TEKRAR_COMPLETER_GRACE=2s", "TEKRAR_LEASE=3s"}, serveEnv...)...)
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
	k, err := stdwebhook.ParseSecret(s.secret)
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
			req.Header = stdwebhook.Headers("evt_storm_"+ch.ID, time.Now(), ev, k)
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
// of order), while clients pay (some answers lost, some charges made only after tekrar gave
// up on them at a provider that cannot cancel a charge key), refund through tekrar, the
// dashboard refunds and disputes behind tekrar's back, and charges are made at the provider
// under keys no order of tekrar's has. When every event is delivered, two `tekrar reconcile`
// run at once over the whole window. Then tekrar recorded each event exactly once, knows
// every charge's newest state, every lost answer ended paid once, and every charge the
// provider made is either the one payment of an order or refunded exactly once, in full,
// by exactly one compensation. For a long run:
//
//	TEKRAR_WEBHOOK_ORDERS=1000 go test -count=1 -run TestSandboxWebhooksDuplicatedAndReordered -v ./cmd/tekrar/
func TestSandboxWebhooksDuplicatedAndReordered(t *testing.T) {
	t.Parallel()
	began := time.Now().UTC().Add(-time.Minute)
	// tok_late takes longer than the replicas' provider timeout, lease and grace together, so
	// tekrar gives up on such an order first; the provider cannot fence, so it makes the
	// charge anyway and tekrar owes its refund.
	s := startWebhookStackWith(t, []string{"TEKRAR_PROVIDER_HORIZON=10m", "TEKRAR_RECONCILE_EVERY=0"},
		"--webhook-duplicate", "0.3", "--webhook-delay", "0.3", "--webhook-delay-for", "700ms",
		"--no-cancel", "--slow-delay", "10s")
	c := newHTTPClient()
	orders := proctest.EnvSize(t, "TEKRAR_WEBHOOK_ORDERS", 40) // a long run: TEKRAR_WEBHOOK_ORDERS=1000
	var mu sync.Mutex
	lost := map[string][]byte{}
	late := 0
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < orders; i += 4 {
				token := "tok_visa"
				switch {
				case i%16 == 7:
					token = "tok_late"
				case i%8 == 3:
					token = "tok_timeout"
				case i%8 == 5:
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
				case token == "tok_late":
					// Given up on, or (on a very slow machine) paid: either way its charge
					// must end paid once or refunded once; checked below.
					mu.Lock()
					late++
					mu.Unlock()
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
	if err := s.db.Select(&charges, `
		SELECT id FROM psp_charges ch WHERE status = 'succeeded' AND refunded_amount = 0
		   AND EXISTS (SELECT 1 FROM payments p WHERE p.provider_charge_id = ch.id) ORDER BY seq LIMIT 6`); err != nil {
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
	// Behind tekrar's back too: charges made at the provider under keys no order has.
	orphans := max(2, orders/20)
	for i := range orphans {
		r := mustSend(t, c, "POST", s.pspBase+"/charges", "",
			[]byte(fmt.Sprintf(`{"key":"stray-%d","amount":%d,"currency":"TRY","card_token":"tok_visa","description":"made at the provider by hand"}`, i, 700+i)))
		if r.Status != 200 || !strings.Contains(string(r.Body), `"status":"succeeded"`) {
			t.Fatalf("orphan charge %d: %d %s", i, r.Status, r.Body)
		}
	}

	// The lost answers: each retried once more, after the webhooks (or the completer) settled it.
	for key, body := range lost {
		var r response
		waitUntil(t, 60*time.Second, "the lost answer of "+key, func() bool {
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
	// Every late charge made and refunded, every key settled, every event delivered.
	settled := func() bool {
		return countRows(t, s.db, `SELECT count(*) FROM compensations WHERE state = 'watching'`) == 0 &&
			countRows(t, s.db, `SELECT count(*) FROM idempotency_keys WHERE state <> 'completed'`) == 0 &&
			countRows(t, s.db, `SELECT count(*) FROM psp_events WHERE delivered_at IS NULL`) == 0
	}
	waitUntil(t, 2*time.Minute+time.Duration(orders)*50*time.Millisecond, "late charges refunded, every event delivered", settled)
	t.Logf("settled after %s", time.Since(began.Add(time.Minute)).Round(time.Second))

	// Two reconciliations at once over the whole window, as real processes.
	outs := make([]string, 2)
	for i := range outs {
		wg.Go(func() {
			p := startTekrar(t, childEnv("DATABASE_URL="+s.dbURL, "TEKRAR_PSP_URL="+s.pspBase, "TEKRAR_LOG_LEVEL=warn"), nil,
				"reconcile", "--since", began.Format(time.RFC3339))
			if code := p.wait(t, 5*time.Minute); code != 0 {
				t.Errorf("reconcile %d exited %d\nstdout:\n%s\nstderr:\n%s", i, code, p.stdout, p.stderr)
			}
			outs[i] = strings.TrimSpace(p.stdout.String())
		})
	}
	wg.Wait()
	// Not fatal: if a compensation never settles, the ledger below says which charge and why.
	for deadline := time.Now().Add(time.Minute); !settled(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("after reconciling, not settled within a minute: compensations watching, keys open or events undelivered")
			break
		}
	}
	t.Logf("reconciled after %s", time.Since(began.Add(time.Minute)).Round(time.Second))

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

	// Every succeeded charge: the one payment of a paid (refunded, disputed) order and no
	// compensation, or no payment and one compensation whose one refund, under the key
	// derived from the charge key, is the charge's only refund and its whole amount.
	type ledger struct {
		ID                                 string
		Payments, Compensations, Refunded  int
		Refunds, CompensationRefunds       int
		RefundedAmount, Amount, PaidOrders int
	}
	var ledgers []ledger
	rows, err := s.db.Queryx(`
		SELECT ch.id, ch.key, ch.amount, ch.refunded_amount,
		       (SELECT count(*) FROM payments p WHERE p.provider_charge_id = ch.id),
		       (SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id
		         WHERE p.provider_charge_id = ch.id AND o.status IN ('paid', 'partially_refunded', 'refunded', 'disputed')),
		       (SELECT count(*) FROM compensations c WHERE c.charge_key = ch.key OR c.charge_id = ch.id),
		       (SELECT count(*) FROM compensations c WHERE c.charge_id = ch.id AND c.state = 'refunded'
		           AND c.amount = ch.amount AND c.refund_id IS NOT NULL),
		       (SELECT count(*) FROM psp_refunds r WHERE r.charge_id = ch.id)
		  FROM psp_charges ch WHERE ch.status = 'succeeded' ORDER BY ch.seq`)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for rows.Next() {
		var l ledger
		var key string
		if err := rows.Scan(&l.ID, &key, &l.Amount, &l.RefundedAmount, &l.Payments, &l.PaidOrders, &l.Compensations, &l.Refunded, &l.Refunds); err != nil {
			t.Fatal(err)
		}
		keys[l.ID] = key
		ledgers = append(ledgers, l)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	paidCharges, compensated := 0, 0
	for i := range ledgers {
		l := &ledgers[i]
		l.CompensationRefunds = countRows(t, s.db, `
			SELECT count(*) FROM psp_refunds r JOIN compensations c ON c.refund_id = r.id
			 WHERE r.charge_id = $1 AND r.key = $2 AND r.amount = $3`, l.ID, derivedRefundKey(keys[l.ID]), l.Amount)
		switch {
		case l.Payments == 1 && l.PaidOrders == 1 && l.Compensations == 0:
			paidCharges++
		case l.Payments == 0 && l.Compensations == 1 && l.Refunded == 1 && l.Refunds == 1 &&
			l.CompensationRefunds == 1 && l.RefundedAmount == l.Amount:
			compensated++
		default:
			t.Errorf("charge %s neither paid once nor refunded once by one compensation: %+v", l.ID, *l)
		}
	}
	if n := countRows(t, s.db, `SELECT count(*) FROM (SELECT charge_id FROM compensations GROUP BY charge_id HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d charges with more than one compensation", n)
	}
	if n := countRows(t, s.db, `SELECT count(*) FROM (SELECT charge_id FROM psp_refunds r
		 WHERE EXISTS (SELECT 1 FROM compensations c WHERE c.charge_id = r.charge_id)
		 GROUP BY charge_id HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d compensated charges refunded more than once", n)
	}
	if n := countRows(t, s.db, `
		SELECT count(*) FROM reconciliation_findings f
		 WHERE f.kind = 'orphan_charge' AND NOT EXISTS (SELECT 1 FROM compensations c
		        WHERE c.charge_id = f.charge_id AND c.state = 'refunded')`); n != 0 {
		t.Errorf("%d orphan charges found whose compensation is not refunded", n)
	}
	if n := countRows(t, s.db, `SELECT count(*) FROM reconciliation_findings WHERE kind IN ('paid_without_charge', 'amount_mismatch')`); n != 0 {
		t.Errorf("%d paid_without_charge or amount_mismatch findings; the run makes none", n)
	}
	byReconcile := countRows(t, s.db, `SELECT count(*) FROM compensations WHERE source = 'reconcile'`)
	if byReconcile != orphans {
		t.Errorf("%d compensations by reconciliation, want one per orphan charge (%d)", byReconcile, orphans)
	}
	for i, out := range outs {
		if !strings.Contains(out, "charges seen") {
			t.Errorf("reconcile %d printed %q", i, out)
		}
	}

	// The console lists every compensation.
	bc := consoleSession(t, s.dbURL, s.bases[0])
	var page strings.Builder
	next := "/admin/compensations"
	for pages := 0; next != "" && pages < 1000; pages++ {
		body := consoleGet(t, bc, s.bases[0]+next)
		page.WriteString(body)
		next = ""
		if m := nextPageRE.FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	var compIDs []int64
	if err := s.db.Select(&compIDs, `SELECT id FROM compensations ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	for _, id := range compIDs {
		if !strings.Contains(page.String(), fmt.Sprintf(`id="compensation-%d"`, id)) {
			t.Errorf("the console's compensations list does not show compensation %d", id)
		}
	}

	givenUp := countRows(t, s.db, `SELECT count(*) FROM compensations WHERE source = 'cancel'`)
	refundsBy := countRows(t, s.db, `SELECT count(*) FROM compensations WHERE state = 'refunded'`)
	var findings []struct {
		Kind string `db:"kind"`
		N    int    `db:"n"`
	}
	if err := s.db.Select(&findings, `SELECT kind::text, count(*) AS n FROM reconciliation_findings GROUP BY kind ORDER BY kind`); err != nil {
		t.Fatal(err)
	}
	found := []string{}
	for _, f := range findings {
		found = append(found, fmt.Sprintf("%s %d", f.Kind, f.N))
	}
	t.Logf("reconcile runs: %q", outs)
	t.Logf("orders %d (late %d), events sent %d, deliveries received %d (duplicates absorbed %d), applied out of order as stale %d, "+
		"lost answers settled %d, charges paid once %d, compensations made %d (given up %d + orphan %d), refunds by compensations %d, "+
		"reconcile findings: %s",
		orders, late, events, deliveries, deliveries-recorded, stale, len(lost), paidCharges, givenUp+byReconcile, givenUp, byReconcile,
		refundsBy, strings.Join(found, ", "))
	if compensated != refundsBy {
		t.Errorf("%d charges refunded by a compensation, %d compensations refunded", compensated, refundsBy)
	}
}

// nextPageRE finds a console list's link to its next page.
var nextPageRE = regexp.MustCompile(`href="(/admin/compensations\?[^"]*after=[^"]*)"`)

// derivedRefundKey is the provider key a compensation's refund must be made under: derived
// from the charge key alone (as checkout derives it), so that racing or restarted workers
// ask for the same refund.
func derivedRefundKey(chargeKey string) string {
	h := sha256.Sum256([]byte("compensate\x00" + chargeKey))
	return "tekrar_co_" + hex.EncodeToString(h[:16])
}

// A replica dies (exit, as abruptly as a kill) after writing a provider event and its effect
// but before committing: nothing of it stays, and the redelivery to the other replica
// applies it once.
func TestWebhookKilledWhileApplying(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	secret := stdwebhook.NewSecret()
	ports := freePorts(t, 2)
	common := []string{"TEKRAR_LOG_LEVEL=warn", "TEKRAR_PSP_WEBHOOK_SECRET=" + secret}
	doomed, baseA := startServe(t, dbURL, ports[0], append(common, "TEKRAR_CRASH_AT=inbox_before_commit", "TEKRAR_CRASH_RATE=1")...)
	_, baseB := startServe(t, dbURL, ports[1], common...)
	k, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := json.Marshal(psp.Event{ID: "evt_kill", Type: psp.EventRefundSucceeded, Created: time.Now().UTC(),
		Data: psp.EventData{ChargeID: "ch_kill", ChargeKey: "pk_kill", Sequence: 2, Amount: 900, Currency: "TRY",
			Status: psp.StatusSucceeded, RefundedAmount: 300}})
	post := func(base string) (int, error) {
		req, _ := http.NewRequest("POST", base+"/webhooks/psp", bytes.NewReader(ev))
		req.Header = stdwebhook.Headers("evt_kill", time.Now(), ev, k)
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
