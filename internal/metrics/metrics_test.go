package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// scrape reads e's /metrics over HTTP, as Prometheus does, and returns the text and the
// parsed families.
func scrape(t testing.TB, e *apptest.Env) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(e.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return string(body), fams
}

// value is the value of the series of family name whose labels include want (a counter's
// or gauge's value, a histogram's count); 0 when there is no such series.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range m.Label {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func orderBody(amount int, token string) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":%d}],
		"amount":%d,"payment":{"card_token":%q},"customer":{"id":"cus_42"}}`, amount, amount, token))
}

// TestIdempotencyOutcomes sends real traffic of every kind through a running tekrar and
// checks each outcome's counter moved by exactly what was sent: a replay counts as a replay
// and not as a second first execution.
func TestIdempotencyOutcomes(t *testing.T) {
	// tok_slow holds its key this long: the in_use and waited requests arrive well within it.
	e := apptest.New(t, func(c *config.Server) { c.SandboxSlowDelay = 3 * time.Second })
	client := fmt.Sprint(e.ClientID)
	post := func(key string, body []byte, headers ...string) apptest.Response {
		t.Helper()
		return e.Do(t, "POST", "/v1/orders", e.Secret, body, append([]string{"Idempotency-Key", key}, headers...)...)
	}
	outcome := func(fams map[string]*dto.MetricFamily, o string) float64 {
		return value(fams, "tekrar_idempotency_requests_total", "client", client, "outcome", o)
	}

	first := post("k-first", orderBody(500, "tok_visa"))
	if first.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	_, fams := scrape(t, e)
	if got := outcome(fams, "first_execution"); got != 1 {
		t.Fatalf("first_execution after one order = %v, want 1", got)
	}
	if got := outcome(fams, "replay"); got != 0 {
		t.Fatalf("replay before any replay = %v", got)
	}

	for range 2 {
		if r := post("k-first", orderBody(500, "tok_visa")); r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("repeat not replayed: %d %s", r.Status, r.Body)
		}
	}
	if r := post("k-first", orderBody(700, "tok_visa")); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("reuse: %d %s", r.Status, r.Body)
	}
	if r := post("", orderBody(500, "tok_visa")); r.Status != http.StatusBadRequest {
		t.Fatalf("empty key: %d %s", r.Status, r.Body)
	}

	// A slow charge holds its key: a repeat without Prefer is in_use, one with it waits.
	slow := make(chan apptest.Response, 1)
	go func() {
		r, _ := e.Send("POST", "/v1/orders", e.Secret, orderBody(900, "tok_slow"), "Idempotency-Key", "k-slow")
		slow <- r
	}()
	waitForKey(t, e, "k-slow")
	if r := post("k-slow", orderBody(900, "tok_slow")); r.Status != http.StatusConflict {
		t.Fatalf("in use: %d %s", r.Status, r.Body)
	}
	if r := post("k-slow", orderBody(900, "tok_slow"), "Prefer", "wait=10"); r.Status != http.StatusCreated || r.Header.Get("Preference-Applied") == "" {
		t.Fatalf("waited: %d %v %s", r.Status, r.Header, r.Body)
	}
	<-slow

	// The same purchase again under another key: keys cannot catch it, the double-tap
	// gauge does.
	if r := post("k-tap", orderBody(500, "tok_visa")); r.Status != http.StatusCreated {
		t.Fatalf("second tap: %d %s", r.Status, r.Body)
	}
	if _, fams := scrape(t, e); value(fams, "tekrar_suspected_double_taps") != 1 {
		t.Errorf("tekrar_suspected_double_taps = %v, want 1", value(fams, "tekrar_suspected_double_taps"))
	}

	// Past the key's retention: the same request is a late retry, another one is a new
	// purchase under an expired key.
	e.Clock.Advance(72 * time.Hour)
	if r := post("k-first", orderBody(500, "tok_visa")); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("late retry: %d %s", r.Status, r.Body)
	}
	if r := post("k-first", orderBody(1500, "tok_visa")); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("expired: %d %s", r.Status, r.Body)
	}

	text, fams := scrape(t, e)
	want := map[string]float64{"first_execution": 3, "replay": 2, "reused": 1, "refused": 1, "in_use": 1,
		"waited": 1, "late_retry": 1, "expired": 1}
	for o, n := range want {
		if got := outcome(fams, o); got != n {
			t.Errorf("outcome %s = %v, want %v", o, got, n)
		}
	}
	if got := value(fams, "tekrar_http_request_duration_seconds", "route", "/v1/orders", "method", "POST", "status", "201"); got != 6 {
		t.Errorf("POST /v1/orders 201 = %v, want 6 (three first executions, two replays, the waited one)", got)
	}
	if got := value(fams, "tekrar_provider_call_duration_seconds", "operation", "charge", "outcome", "succeeded"); got != 3 {
		t.Errorf("provider charges succeeded = %v, want 3 (replays do not call the provider)", got)
	}
	if got := value(fams, "tekrar_backlog_up"); got != 1 {
		t.Errorf("tekrar_backlog_up = %v", got)
	}
	if fams["go_sql_max_open_connections"] == nil {
		t.Error("no pool statistics (go_sql_max_open_connections)")
	}
	checkNamesExist(t, fams)
	for _, secret := range []string{"k-first", "k-slow", "k-tap", e.Secret, "cus_42", "ord_"} {
		if strings.Contains(text, secret) {
			t.Errorf("the scrape contains %q", secret)
		}
	}
}

// waitForKey waits until a request with key has claimed it.
func waitForKey(t *testing.T, e *apptest.Env, key string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := e.DB.Get(&n, `SELECT count(*) FROM idempotency_keys WHERE key = $1`, key); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s never claimed", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCardinalityBounded sends 10,000 requests with distinct idempotency keys, in paths,
// headers and bodies, and with odd methods, and register batches from distinct registers
// under distinct batch and sale keys, and checks that no series was added for them:
// the number of series after is what it was after the first 100.
func TestCardinalityBounded(t *testing.T) {
	e := apptest.New(t)
	send := func(i int) error {
		key := fmt.Sprintf("card-%06d", i)
		var r apptest.Response
		var err error
		switch i % 5 {
		case 0: // a real order every 50th request, else a body that is refused
			body := []byte(`{"not json`)
			if i%50 == 0 {
				body = orderBody(100+i, "tok_visa")
			}
			r, err = e.Send("POST", "/v1/orders", e.Secret, body, "Idempotency-Key", key)
		case 1: // a register's batch every 50th request, from a register of its own
			if i%50 == 1 {
				sale := fmt.Sprintf(`{"idempotency_key":%q,"sold_at":"2026-05-01T09:30:00Z","order":{"currency":"TRY",
					"items":[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":100}],"amount":100,"payment":{"method":"cash"}}}`, key)
				r, err = e.Send("POST", "/v1/pos/sales", e.Secret, []byte(fmt.Sprintf(
					`{"batch_key":%q,"register":{"id":%q,"name":"Till %s"},"sales":[%s,%s]}`, key, key, key, sale, sale)))
				if err == nil && (r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"created"`)) {
					err = fmt.Errorf("batch: %d %s", r.Status, r.Body)
				}
				break
			}
			r, err = e.Send("GET", "/v1/idempotency-keys/"+key, e.Secret, nil)
		case 2:
			r, err = e.Send("GET", "/no/such/"+key, e.Secret, nil)
		case 3:
			r, err = e.Send("PURGE-"+key[len(key)-3:], "/v1/orders/"+key, e.Secret, nil)
		case 4:
			r, err = e.Send("POST", "/v1/orders/"+key+"/refunds", e.Secret, []byte(`{}`), "Idempotency-Key", key)
		}
		if err == nil && r.Status >= 500 {
			err = fmt.Errorf("%d %s", r.Status, r.Body)
		}
		return err
	}
	run := func(from, to int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w; i < to; i += 8 {
					if err := send(i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(0, 100)
	_, before := scrape(t, e)
	run(100, 10_100)
	text, after := scrape(t, e)

	if b, a := series(before), series(after); a != b {
		t.Errorf("series grew with distinct keys: %d after 100 requests, %d after 10,100\nnew: %v", b, a, newSeries(before, after))
	}
	if got := value(after, "tekrar_http_request_duration_seconds"); got < 10_100 {
		t.Errorf("requests counted %v, want at least 10,100", got)
	}
	if strings.Contains(text, "card-0") {
		t.Error("a key appears in the scrape")
	}
	if got := value(after, "tekrar_pos_sales_total", "outcome", "created"); got != 202 {
		t.Errorf("register sales created %v, want 202 (one of two in each of the 202 batches; the other replays)", got)
	}
}

// series counts the tekrar_ series (the runtime's are left out: they do not depend on
// traffic, but some appear only after the first garbage collection).
func series(fams map[string]*dto.MetricFamily) int {
	n := 0
	for name, f := range fams {
		if strings.HasPrefix(name, "tekrar_") {
			n += len(f.Metric)
		}
	}
	return n
}

func newSeries(before, after map[string]*dto.MetricFamily) []string {
	seen := map[string]bool{}
	for name, f := range before {
		for _, m := range f.Metric {
			seen[name+m.String()] = true
		}
	}
	var out []string
	for name, f := range after {
		for _, m := range f.Metric {
			if strings.HasPrefix(name, "tekrar_") && !seen[name+m.String()] {
				out = append(out, name+fmt.Sprint(m.Label))
			}
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = out[:20]
	}
	return out
}

// TestBacklogsFromPostgres checks the scrape-time gauges against the rows they count: the
// outbox events nobody dispatched (this test runs no River), two keys handed to an
// operator, and one key whose payment outcome is unknown (and one completed key, which
// is neither).
func TestBacklogsFromPostgres(t *testing.T) {
	e := apptest.New(t)
	for _, key := range []string{"b-attention-1", "b-attention-2", "b-unknown", "b-paid"} {
		if r := e.Do(t, "POST", "/v1/orders", e.Secret, orderBody(300, "tok_visa"), "Idempotency-Key", key); r.Status != http.StatusCreated {
			t.Fatalf("order %s: %d %s", key, r.Status, r.Body)
		}
	}
	e.DB.MustExec(`UPDATE idempotency_keys SET state = 'needs_attention', response_status = NULL, response_body = NULL,
	                      response_headers = NULL WHERE key LIKE 'b-attention-%'`)
	e.DB.MustExec(`UPDATE idempotency_keys SET state = 'in_progress', response_status = NULL, response_body = NULL,
	                      response_headers = NULL, lease_expires_at = now() - interval '10 minutes',
	                      created_at = now() - interval '20 minutes'
	                WHERE key = 'b-unknown'`)
	var events int
	if err := e.DB.Get(&events, `SELECT count(*) FROM outbox_events`); err != nil {
		t.Fatal(err)
	}
	_, fams := scrape(t, e)
	if events == 0 || value(fams, "tekrar_outbox_pending_events") != float64(events) {
		t.Errorf("tekrar_outbox_pending_events = %v, want the %d undispatched events", value(fams, "tekrar_outbox_pending_events"), events)
	}
	if value(fams, "tekrar_outbox_lag_seconds") <= 0 {
		t.Error("tekrar_outbox_lag_seconds is 0 with events waiting")
	}
	if got := value(fams, "tekrar_attention_backlog"); got != 2 {
		t.Errorf("tekrar_attention_backlog = %v, want 2", got)
	}
	if got := value(fams, "tekrar_payments_outcome_unknown"); got != 1 {
		t.Errorf("tekrar_payments_outcome_unknown = %v, want 1", got)
	}
	if got := value(fams, "tekrar_payments_outcome_unknown_oldest_seconds"); got < 20*60 {
		t.Errorf("tekrar_payments_outcome_unknown_oldest_seconds = %v, want at least 20 minutes", got)
	}
}
