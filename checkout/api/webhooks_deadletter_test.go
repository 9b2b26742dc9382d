package api_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/apptest"
)

// signedEvent is a charge event's body whose data members are given raw, so that a test can
// put in them what the sandbox never sends.
func signedEvent(id, data string) []byte {
	return []byte(`{"id":"` + id + `","type":"charge.succeeded","created":"2026-12-04T10:00:00Z","data":{` + data + `}}`)
}

// deadLetter is the dead letter kept of event id: its raw body and deliveries.
func deadLetter(t *testing.T, e *apptest.Env, id string) (body []byte, deliveries int, state string) {
	t.Helper()
	if err := e.DB.QueryRow(`SELECT body, deliveries, state FROM provider_dead_letters WHERE webhook_id = $1`, id).
		Scan(&body, &deliveries, &state); err != nil {
		t.Fatalf("dead letter %s: %v", id, err)
	}
	return body, deliveries, state
}

// A validly signed event that tekrar cannot store is the provider's word all the same: it is
// kept as it arrived (its raw bytes) as a dead letter and acknowledged, so that the provider
// stops resending it and an operator sees it; a redelivery of it is counted on the same
// dead letter, never stored twice.
func TestProviderWebhookUnstorableEventsAreDeadLetters(t *testing.T) {
	e, k := inboxEnv(t)
	cases := []struct{ name, id, data string }{
		{"a NUL in a string", "evt_nul", `"charge_id":"ch_nul","charge_key":"tekrar_ch_nul","sequence":1,"amount":9000,"currency":"TRY","status":"succeeded","description":"order\u00001"`},
		{"a NUL in a member tekrar does not read", "evt_nul2", `"charge_id":"ch_nul2","charge_key":"tekrar_ch_nul2","sequence":1,"amount":9000,"currency":"TRY","status":"succeeded","note":"a\u0000b"`},
		{"invalid UTF-8", "evt_utf", "\"charge_id\":\"ch_utf\",\"charge_key\":\"tekrar_ch_utf\",\"sequence\":1,\"amount\":9000,\"currency\":\"TRY\",\"status\":\"succeeded\",\"card_brand\":\"vis\xe9a\""},
		{"a sequence of 2^31", "evt_seq", `"charge_id":"ch_seq","charge_key":"tekrar_ch_seq","sequence":2147483648,"amount":9000,"currency":"TRY","status":"succeeded"`},
		{"a sequence beyond int64", "evt_seq2", `"charge_id":"ch_seq2","charge_key":"tekrar_ch_seq2","sequence":99999999999999999999,"amount":9000,"currency":"TRY","status":"succeeded"`},
		{"a charge without a sequence", "evt_seq0", `"charge_id":"ch_seq0","charge_key":"tekrar_ch_seq0","amount":9000,"currency":"TRY","status":"succeeded"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := signedEvent(c.id, c.data)
			for i := range 3 {
				status, outcome, err := deliver(e, k, c.id, body, nil)
				if err != nil || status != 200 || outcome != "dead_letter" {
					t.Fatalf("delivery %d: %d %s %v, want 200 dead_letter", i+1, status, outcome, err)
				}
			}
			got, deliveries, state := deadLetter(t, e, c.id)
			if !bytes.Equal(got, body) {
				t.Errorf("kept %q, want the raw body %q", got, body)
			}
			if deliveries != 3 || state != "dead" {
				t.Errorf("deliveries %d state %s, want 3 dead", deliveries, state)
			}
		})
	}
	if n := count(t, e, `SELECT count(*) FROM provider_dead_letters`); n != len(cases) {
		t.Errorf("%d dead letters, want %d (one per event, whatever its deliveries)", n, len(cases))
	}
	if n := count(t, e, `SELECT count(*) FROM provider_events`) + count(t, e, `SELECT count(*) FROM provider_charges`); n != 0 {
		t.Errorf("dead letters applied %d rows", n)
	}
	// A signed body that is not even an event, cut in transit or broken at the provider, is
	// kept the same way, under its webhook-id.
	// (As application/octet-stream: the OpenAPI document's application/json is JSON.)
	cut := []byte(`{"id":"evt_cut","type":"charge.succ`)
	h := stdwebhook.Headers("evt_cut", time.Now(), cut, k)
	h.Set("Content-Type", "application/octet-stream")
	if status, outcome, err := deliver(e, k, "evt_cut", cut, h); err != nil || status != 200 || outcome != "dead_letter" {
		t.Fatalf("a cut body: %d %s %v, want 200 dead_letter", status, outcome, err)
	}
	if got, _, _ := deadLetter(t, e, "evt_cut"); !bytes.Equal(got, cut) {
		t.Errorf("kept %q, want %q", got, cut)
	}
}

// A valid event whose effect fails for a reason that may pass (here, a serialization failure)
// is not a dead letter: it is answered 5xx and the provider delivers it again. One that the
// database refuses as data (a data exception) is kept as a dead letter and acknowledged, and
// applies once replayed after the fix.
func TestProviderWebhookTransientFailureIsRetriedNotDeadLettered(t *testing.T) {
	e, k := inboxEnv(t)
	if _, err := e.DB.Exec(`
		CREATE FUNCTION refuse_charge() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		    IF NEW.charge_id = 'ch_busy' THEN RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END IF;
		    IF NEW.charge_id = 'ch_data' THEN RAISE EXCEPTION 'out of range' USING ERRCODE = '22003'; END IF;
		    RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_charge BEFORE INSERT ON provider_charges FOR EACH ROW EXECUTE FUNCTION refuse_charge();`); err != nil {
		t.Fatal(err)
	}
	busy := signedEvent("evt_busy", `"charge_id":"ch_busy","charge_key":"tekrar_ch_busy","sequence":1,"amount":9000,"currency":"TRY","status":"succeeded"`)
	if status, _, _ := deliver(e, k, "evt_busy", busy, nil); status < 500 {
		t.Fatalf("a transient failure: %d, want 5xx", status)
	}
	if n := count(t, e, `SELECT count(*) FROM provider_dead_letters`); n != 0 {
		t.Fatalf("a transient failure made %d dead letters", n)
	}
	data := signedEvent("evt_data", `"charge_id":"ch_data","charge_key":"tekrar_ch_data","sequence":1,"amount":9000,"currency":"TRY","status":"succeeded"`)
	if status, outcome, _ := deliver(e, k, "evt_data", data, nil); status != 200 || outcome != "dead_letter" {
		t.Fatalf("refused as data: %d %s, want 200 dead_letter", status, outcome)
	}
	if _, err := e.DB.Exec(`DROP TRIGGER refuse_charge ON provider_charges`); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := e.DB.QueryRow(`SELECT id FROM provider_dead_letters WHERE webhook_id = 'evt_data'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	outcome, err := e.App.Inbox.ReplayDeadLetter(t.Context(), id)
	if err != nil || outcome != "applied" {
		t.Fatalf("replay: %s %v, want applied", outcome, err)
	}
	if _, _, state := deadLetter(t, e, "evt_data"); state != "replayed" {
		t.Errorf("state %s after the replay, want replayed", state)
	}
	if n := count(t, e, `SELECT count(*) FROM provider_events WHERE event_id = 'evt_data' AND outcome = 'applied'`); n != 1 {
		t.Errorf("%d applied events after the replay, want 1", n)
	}
	if _, err := e.App.Inbox.ReplayDeadLetter(t.Context(), id); err == nil {
		t.Error("a dead letter replayed twice")
	}
	// The provider's redelivery after the replay is a duplicate of the event now stored.
	if status, outcome, _ := deliver(e, k, "evt_data", data, nil); status != 200 || outcome != "duplicate" {
		t.Errorf("redelivery after the replay: %d %s, want 200 duplicate", status, outcome)
	}
}
