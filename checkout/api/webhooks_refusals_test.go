package api_test

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/apptest"
)

// refusals is the refusal counters of every bucket, by reason.
func refusals(t *testing.T, e *apptest.Env) map[string]int {
	t.Helper()
	e.App.Inbox.Flush() // the counts are written in the background
	rows, err := e.DB.Query(`SELECT reason, sum(count) FROM provider_inbox_refusals GROUP BY reason`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var r string
		var n int
		if err := rows.Scan(&r, &n); err != nil {
			t.Fatal(err)
		}
		got[r] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// Each refused delivery is counted once under its reason class, stores nothing of itself,
// and is still answered 400; the genuine delivery is not counted.
func TestProviderWebhookRefusalsCounted(t *testing.T) {
	e, k := inboxEnv(t)
	body := event(t, "evt_rc", psp.EventChargeSucceeded, "ch_rc", 1, 0)
	other, _ := stdwebhook.ParseSecret(stdwebhook.NewSecret())
	badTS := stdwebhook.Headers("evt_rc", time.Now(), body, k)
	badTS.Set(stdwebhook.HeaderTimestamp, "yesterday")
	cases := []struct {
		name, reason string
		h            http.Header
		body         []byte
	}{
		{"forged: another key", "bad_signature", stdwebhook.Headers("evt_rc", time.Now(), body, other), body},
		{"body changed after signing", "bad_signature", stdwebhook.Headers("evt_rc", time.Now(), body, k), bytes.Replace(body, []byte("9000"), []byte("9001"), 1)},
		{"stale: six minutes old", "stale", stdwebhook.Headers("evt_rc", time.Now().Add(-6*time.Minute), body, k), body},
		{"from the future", "future", stdwebhook.Headers("evt_rc", time.Now().Add(6*time.Minute), body, k), body},
		{"no signature", "malformed_headers", http.Header{}, body},
		{"timestamp not a number", "malformed_headers", badTS, body},
		{"replayed under another id", "id_mismatch", stdwebhook.Headers("evt_other", time.Now(), body, k), body},
	}
	want := map[string]int{}
	for _, c := range cases {
		status, code, err := deliver(e, k, "", c.body, c.h)
		if err != nil || status != 400 || code != "webhook_signature_invalid" {
			t.Fatalf("%s: %d %s %v, want 400 webhook_signature_invalid", c.name, status, code, err)
		}
		want[c.reason]++
		got := refusals(t, e)
		for r, n := range want {
			if got[r] != n {
				t.Fatalf("after %s: counted %v, want %v", c.name, got, want)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("after %s: counted %v, want %v", c.name, got, want)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM provider_events`) + count(t, e, `SELECT count(*) FROM provider_charges`); n != 0 {
		t.Fatalf("refused deliveries stored %d rows", n)
	}
	if n := count(t, e, `SELECT count(*) FROM provider_inbox_refusals WHERE last_remote NOT IN ('127.0.0.1', '::1')`); n != 0 {
		t.Errorf("%d buckets do not name the sender's address", n)
	}
	if status, outcome, err := deliver(e, k, "evt_rc", body, nil); err != nil || status != 200 || outcome != "applied" {
		t.Fatalf("the genuine delivery: %d %s %v", status, outcome, err)
	}
	if got := refusals(t, e); len(got) != len(want) || got["bad_signature"] != want["bad_signature"] {
		t.Errorf("the genuine delivery changed the counters: %v, want %v", got, want)
	}
}

// Fifty forged deliveries at once are fifty 400s and a count of 50 in their bucket: the
// increment is atomic, not read and written back.
func TestProviderWebhookRefusalsCountedAtOnce(t *testing.T) {
	e, k := inboxEnv(t)
	other, _ := stdwebhook.ParseSecret(stdwebhook.NewSecret())
	body := event(t, "evt_probe", psp.EventChargeSucceeded, "ch_probe", 1, 0)
	const n = 200
	statuses := make([]int, n)
	codes := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			statuses[i], codes[i], _ = deliver(e, k, "", body, stdwebhook.Headers("evt_probe", time.Now(), body, other))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if statuses[i] != 400 || codes[i] != "webhook_signature_invalid" {
			t.Errorf("delivery %d: %d %s", i, statuses[i], codes[i])
		}
	}
	// The deliveries may straddle a minute: the sum over buckets is what must be exact.
	if got := refusals(t, e); got["bad_signature"] != n || len(got) != 1 {
		t.Errorf("counted %v, want bad_signature %d", got, n)
	}
	if c := count(t, e, `SELECT count(*) FROM provider_inbox_refusals`); c < 1 || c > 2 {
		t.Errorf("%d buckets for one storm, want 1 (2 across a minute)", c)
	}
	if c := count(t, e, `SELECT count(*) FROM provider_events`); c != 0 {
		t.Errorf("%d events stored", c)
	}
}

// Buckets older than seven days are deleted by the next count: the table stays bounded.
func TestProviderWebhookRefusalsPruned(t *testing.T) {
	e, k := inboxEnv(t)
	if _, err := e.DB.Exec(`
		INSERT INTO provider_inbox_refusals (bucket, reason, count, last_at, last_remote)
		VALUES (date_trunc('minute', now() - interval '8 days', 'UTC'), 'stale', 7, now() - interval '8 days', '10.0.0.1'),
		       (date_trunc('minute', now() - interval '6 days', 'UTC'), 'stale', 3, now() - interval '6 days', '10.0.0.1')`); err != nil {
		t.Fatal(err)
	}
	body := event(t, "evt_old", psp.EventChargeSucceeded, "ch_old", 1, 0)
	if status, _, _ := deliver(e, k, "", body, stdwebhook.Headers("evt_old", time.Now().Add(-time.Hour), body, k)); status != 400 {
		t.Fatalf("stale delivery: %d", status)
	}
	if got := refusals(t, e); got["stale"] != 4 {
		t.Errorf("stale counted %d, want 4 (3 kept, the 8-day-old 7 pruned, 1 new)", got["stale"])
	}
}

// A verified event whose effect fails is answered 500 (the provider delivers it again),
// leaves no event row (its transaction rolled back) and is counted as apply_failed.
func TestProviderWebhookApplyFailedCounted(t *testing.T) {
	e, k := inboxEnv(t)
	if _, err := e.DB.Exec(`
		CREATE FUNCTION refuse_charge() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'the charge cannot be recorded'; END $$;
		CREATE TRIGGER refuse_charge BEFORE INSERT ON provider_charges FOR EACH ROW EXECUTE FUNCTION refuse_charge();`); err != nil {
		t.Fatal(err)
	}
	body := event(t, "evt_fail", psp.EventChargeSucceeded, "ch_fail", 1, 0)
	if status, _, _ := deliver(e, k, "evt_fail", body, nil); status != 500 {
		t.Fatalf("failed apply: %d, want 500", status)
	}
	if got := refusals(t, e); got["apply_failed"] != 1 || len(got) != 1 {
		t.Errorf("counted %v, want apply_failed 1", got)
	}
	if c := count(t, e, `SELECT count(*) FROM provider_events`); c != 0 {
		t.Errorf("%d events stored by a rolled-back apply", c)
	}
}

// A refusal that cannot be counted is still answered 400, never 500.
func TestProviderWebhookRefusalUncountedStill400(t *testing.T) {
	e, k := inboxEnv(t)
	if _, err := e.DB.Exec(`ALTER TABLE provider_inbox_refusals RENAME TO gone`); err != nil {
		t.Fatal(err)
	}
	other, _ := stdwebhook.ParseSecret(stdwebhook.NewSecret())
	body := event(t, "evt_nc", psp.EventChargeSucceeded, "ch_nc", 1, 0)
	if status, code, err := deliver(e, k, "", body, stdwebhook.Headers("evt_nc", time.Now(), body, other)); status != 400 || code != "webhook_signature_invalid" {
		t.Fatalf("%d %s %v, want 400 webhook_signature_invalid", status, code, err)
	}
}
