package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestWebhookDeliveryKilledMidAttempt: `tekrar serve` is killed with SIGKILL while its
// delivery of an order.paid is in flight at the merchant's endpoint (which had not
// answered). Nothing of the attempt was recorded. Started again, tekrar rescues the job and
// delivers the event under the same webhook-id; the merchant, deduplicating with
// checkout/stdwebhook.Receive, applies it once.
func TestWebhookDeliveryKilledMidAttempt(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := []string{"TEKRAR_LOG_LEVEL=warn", "TEKRAR_OUTBOX_POLL=20ms", "TEKRAR_OUTBOX_RESCUE_AFTER=25s",
		"TEKRAR_SECRETS_KEY=" + deliveries.NewSecretsKey(), "TEKRAR_WEBHOOKS_ALLOW_LOOPBACK=true"}
	port := freePorts(t, 1)[0]
	p, base := startServe(t, dbURL, port, env...)
	secret := newClientSecret(t, dbURL, "hooks app")
	c := newHTTPClient()

	merchant := openDB(t, dbtest.NewURL(t))
	if _, err := merchant.Exec(stdwebhook.ReceiptsTable + `; CREATE TABLE paid (event_id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	var verifier stdwebhook.Verifier
	inFlight := make(chan struct{})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		v := verifier
		seen = append(seen, r.Header.Get(stdwebhook.HeaderID))
		first := len(seen) == 1
		mu.Unlock()
		msg, err := v.Verify(r.Header, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if first { // the endpoint is slow; tekrar dies while it waits
			close(inFlight)
			<-r.Context().Done()
			return
		}
		if _, err := stdwebhook.Receive(r.Context(), merchant.DB, msg, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO paid (event_id) VALUES ($1)`, msg.ID)
			return err
		}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()

	r := mustSend(t, c, "POST", base+"/v1/webhook-endpoints", secret,
		[]byte(`{"url":"`+rcv.URL+`/hooks","event_types":["order.paid"]}`), "Content-Type", "application/json")
	var ep struct{ Secret string }
	if err := json.Unmarshal(r.Body, &ep); err != nil || r.Status != 201 {
		t.Fatalf("create endpoint: %d %s", r.Status, r.Body)
	}
	key, err := stdwebhook.ParseSecret(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	verifier = stdwebhook.Verifier{Keys: []stdwebhook.Key{key}}
	mu.Unlock()
	if r := mustSend(t, c, "POST", base+"/v1/orders", secret, orderJSONBody(4500, "tok_visa"), "Idempotency-Key", "hooks-kill"); r.Status != 201 {
		t.Fatalf("payment: %d %s", r.Status, r.Body)
	}
	select {
	case <-inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery reached the endpoint")
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if n := countRows(t, db, `SELECT count(*) FROM webhook_attempts`); n != 0 {
		t.Fatalf("%d attempts recorded by a process killed before the answer", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'`); n != 1 {
		t.Fatalf("%d pending deliveries, want the one in flight", n)
	}

	startServe(t, dbURL, port, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitUntil(t, 2*time.Minute, "the delivery to succeed after the restart", func() bool {
		return ctx.Err() == nil && countRows(t, db, `SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'`) == 1
	})
	var eventID string
	if err := db.Get(&eventID, `SELECT event_id FROM webhook_deliveries`); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, merchant, `SELECT count(*) FROM paid WHERE event_id = $1`, eventID); n != 1 {
		t.Fatalf("the merchant applied the event %d times, want once", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("%d requests, want the killed one and at least one after the restart", len(seen))
	}
	for _, id := range seen {
		if id != eventID {
			t.Fatalf("webhook-ids sent %v, want %s on every request", seen, eventID)
		}
	}
}
