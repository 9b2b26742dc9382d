package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestServeMetricsOnTheirOwnAddress runs `tekrar serve` with TEKRAR_METRICS_ADDR: the
// metrics are served there and only there, the API's address does not serve them, and
// after an order and its replay they count one first execution, one replay, and the
// order.paid event's dispatch by the process's outbox dispatcher (counted as a completed job
// of the kind outbox_dispatch, the series of the River job each event once had); the sweep,
// scheduled every second, counts its ok runs and its last success.
func TestServeMetricsOnTheirOwnAddress(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	ports := freePorts(t, 2)
	p, base := startServe(t, dbURL, ports[0], "TEKRAR_METRICS_ADDR="+addrOf(ports[1]), "TEKRAR_SWEEP_INTERVAL=1s")
	defer p.signal(t, os.Interrupt)
	metrics := "http://" + addrOf(ports[1]) + "/metrics"
	c := newHTTPClient()

	secret := newClientSecret(t, dbURL, "metrics app")
	for range 2 {
		if r := mustSend(t, c, "POST", base+"/v1/orders", secret, orderJSONBody(100, "tok_visa"), "Idempotency-Key", "m-1"); r.Status != 201 {
			t.Fatalf("order: %d %s", r.Status, r.Body)
		}
	}
	if r := mustSend(t, c, "GET", base+"/metrics", "", nil); r.Status != 404 {
		t.Errorf("the API's address serves /metrics: %d", r.Status)
	}
	if r := mustSend(t, c, "GET", "http://"+addrOf(ports[1])+"/v1/client", secret, nil); r.Status != 404 {
		t.Errorf("the metrics address serves the API: %d", r.Status)
	}

	var text string
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := mustSend(t, c, "GET", metrics, "", nil)
		if r.Status != 200 {
			t.Fatalf("scrape: %d %s", r.Status, r.Body)
		}
		text = string(r.Body)
		dispatched := regexp.MustCompile(`(?m)^tekrar_jobs_total\{kind="outbox_dispatch",outcome="completed"\} [1-9]`).MatchString(text)
		swept := regexp.MustCompile(`(?m)^tekrar_scheduled_runs_total\{outcome="ok",task="sweep"\} [1-9]`).MatchString(text)
		if dispatched && swept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the order.paid dispatch or a sweep run was never counted:\n%s\n%s", grepLines(text, "tekrar_jobs_total"),
				grepLines(text, "tekrar_scheduled_runs_total"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{
		`tekrar_idempotency_requests_total{client="1",outcome="first_execution"} 1`,
		`tekrar_idempotency_requests_total{client="1",outcome="replay"} 1`,
		`tekrar_http_request_duration_seconds_count{method="POST",route="/v1/orders",status="201"} 2`,
		`tekrar_provider_call_duration_seconds_count{operation="charge",outcome="succeeded"} 1`,
		`tekrar_backlog_up 1`,
		`tekrar_scheduled_runs_total{outcome="failed",task="settle"} 0`,
		`tekrar_pos_sales_total{outcome="created"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("the scrape lacks %s\n%s", want, grepLines(text, "tekrar_"))
		}
	}
	if !regexp.MustCompile(`(?m)^tekrar_scheduled_last_success_timestamp_seconds\{task="sweep"\} [1-9]`).MatchString(text) {
		t.Errorf("no last success of the sweep:\n%s", grepLines(text, "tekrar_scheduled_"))
	}
	if strings.Contains(text, secret) || strings.Contains(text, "m-1") {
		t.Error("the scrape contains the secret or the key")
	}
	if os.Getenv("TEKRAR_METRICS_SAMPLE") != "" {
		t.Log(grepLines(text, "tekrar_"))
	}
}

// grepLines keeps the lines of text that start with prefix.
func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
