package api_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// charged counts the charges in the in-process sandbox's ledger (canceled keys are not
// charges).
func charged(t testing.TB, e *apptest.Env) int {
	t.Helper()
	return count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`)
}

func clientOrders(t testing.TB, e *apptest.Env) int {
	t.Helper()
	return count(t, e, `SELECT count(*) FROM orders WHERE client_id = $1`, e.ClientID)
}

func replayOf(t testing.TB, r, first apptest.Response) {
	t.Helper()
	if r.Status != first.Status || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, first.Body) {
		t.Fatalf("want a replay of the first answer (%d): got %d replayed=%q %s",
			first.Status, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
}

// TestRetokenizedRetryIsTheSamePurchase: a mobile SDK makes a new single-use token for
// each attempt. A retry with the same key, the same items and a new token of the same card
// is the same purchase: it is answered the first answer, and the card is charged once. A
// token of another card, or one the provider does not know, is another request.
func TestRetokenizedRetryIsTheSamePurchase(t *testing.T) {
	e := apptest.New(t)
	first := postOrder(t, e, e.Secret, "k-retoken", orderBody(9000, "tok_visa_attempt1"))
	if first.Status != 201 || decodeOrder(t, first).Payment.CardLast4 != "4242" {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	replayOf(t, postOrder(t, e, e.Secret, "k-retoken", orderBody(9000, "tok_visa_attempt2")), first)
	replayOf(t, postOrder(t, e, e.Secret, "k-retoken", orderBody(9000, "tok_visa")), first)
	replayOf(t, postOrder(t, e, e.Secret, "k-retoken", orderBody(9000, "tok_visa_attempt1")), first)
	if n := charged(t, e); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if n := clientOrders(t, e); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	e.App.Service.FlushHistory()
	if n := count(t, e, `SELECT count(*) FROM key_events WHERE key = 'k-retoken' AND kind = 'replayed'
		AND detail->>'matched' = 'scope'`); n != 2 {
		t.Fatalf("%d replays recorded as matched by scope, want 2 (the new tokens')", n)
	}

	for _, tt := range []struct{ name, body string }{
		{"another card", string(orderBody(9000, "tok_mastercard_attempt2"))},
		{"a token the provider does not know", string(orderBody(9000, "tok_nobody_knows"))},
		{"the same card, another amount", string(orderBody(9001, "tok_visa_attempt2"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := problemOf(t, postOrder(t, e, e.Secret, "k-retoken", []byte(tt.body)), 422, "idempotency_key_reused")
			advice(t, p, false, false)
			if n := charged(t, e); n != 1 {
				t.Fatalf("%d charges after the refusal, want 1", n)
			}
		})
	}
}

// TestRetokenizedRetriesAtOnce: retries with different tokens of one card, all at once
// while the first charge is in flight (tok_slow waits at the provider): one order, one
// charge, and every retry answered the same order.
func TestRetokenizedRetriesAtOnce(t *testing.T) {
	e := apptest.New(t)
	const n = 8
	var wg sync.WaitGroup
	out := make([]apptest.Response, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = e.Send("POST", "/v1/orders", e.Secret, orderBody(4500, fmt.Sprintf("tok_slow_%d", i)),
				"Idempotency-Key", "k-retoken-race", "Prefer", "wait=10")
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if out[i].Status != 201 || !bytes.Equal(out[i].Body, out[0].Body) {
			t.Fatalf("retry %d: %d %s; retry 0: %d %s", i, out[i].Status, out[i].Body, out[0].Status, out[0].Body)
		}
	}
	if c, o := charged(t, e), clientOrders(t, e); c != 1 || o != 1 {
		t.Fatalf("%d charges and %d orders, want 1 and 1", c, o)
	}
}

// TestKeysWithoutScopeMatchExactly: a key stored before the scope fingerprint existed has
// only its exact fingerprint, whose definition did not change: its retries with the same
// body replay, and a new token is refused as before (the documented limit).
func TestKeysWithoutScopeMatchExactly(t *testing.T) {
	e := apptest.New(t)
	body := orderBody(9000, "tok_visa_old")
	first := postOrder(t, e, e.Secret, "k-old", body)
	if first.Status != 201 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	// The exact fingerprint's definition, written out: what keys stored before hold.
	canon, err := checkout.CanonicalJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	fp := sha256.Sum256(append([]byte("POST\n/v1/orders\n"), canon...))
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-old' AND fingerprint = $1`, fp[:]); n != 1 {
		t.Error("the stored fingerprint is not the exact one of the body as it was always defined")
	}
	// What a key written before migration 00031 holds: the exact fingerprint alone.
	if _, err := e.DB.Exec(`UPDATE idempotency_keys SET fingerprint = $2, scope_fingerprint = NULL, card_fingerprint = NULL
		WHERE client_id = $1 AND key = 'k-old'`, e.ClientID, fp[:]); err != nil {
		t.Fatal(err)
	}
	replayOf(t, postOrder(t, e, e.Secret, "k-old", body), first)
	problemOf(t, postOrder(t, e, e.Secret, "k-old", orderBody(9000, "tok_visa_new")), 422, "idempotency_key_reused")
	if n := charged(t, e); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

// TestCardLookupUnavailable: when the provider cannot say which card a token is, nothing
// is decided on a guess. A first request asks the provider nothing but its charge: with
// the provider down, its outcome is unknown (503 payment_pending, the key kept) and a
// retry with a new token of it cannot be compared (503 card_identity_unavailable, never a
// new key); once the provider answers, that retry resumes it. A retry with a new token of
// a completed key is neither replayed nor refused as reuse; a retry with the first token
// still replays, the provider not being asked. Once the provider answers again, the new
// token's retry replays.
func TestCardLookupUnavailable(t *testing.T) {
	ledger := dbtest.New(t)
	var down atomic.Bool
	inner := psp.NewHandler(psp.NewSandbox(ledger, psp.SandboxOptions{}), slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := apptest.New(t, func(c *config.Server) {
		c.PSPURL = srv.URL
		c.ProviderTimeout = 2 * time.Second
	})
	remoteCharges := func() int {
		t.Helper()
		var n int
		if err := ledger.Get(&n, `SELECT count(*) FROM psp_charges`); err != nil {
			t.Fatal(err)
		}
		return n
	}

	down.Store(true)
	problemOf(t, postOrder(t, e, e.Secret, "k-down-first", orderBody(9000, "tok_visa_1")), 503, "payment_pending")
	if n := remoteCharges(); n != 0 {
		t.Fatalf("a first request with the provider down charged %d", n)
	}
	p := problemOf(t, postOrder(t, e, e.Secret, "k-down-first", orderBody(9000, "tok_visa_2")), 503, "card_identity_unavailable")
	advice(t, p, true, false)
	down.Store(false)
	resumed := postOrder(t, e, e.Secret, "k-down-first", orderBody(9000, "tok_visa_2"))
	if resumed.Status != 201 {
		t.Fatalf("the re-tokenized retry of the first request: %d %s", resumed.Status, resumed.Body)
	}
	replayOf(t, postOrder(t, e, e.Secret, "k-down-first", orderBody(9000, "tok_visa_3")), resumed)

	first := postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_visa_1"))
	if first.Status != 201 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	down.Store(true)
	p = problemOf(t, postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_visa_2")), 503, "card_identity_unavailable")
	advice(t, p, true, false)
	problemOf(t, postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_mastercard_2")), 503, "card_identity_unavailable")
	replayOf(t, postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_visa_1")), first)
	// Another body is refused without asking the provider.
	problemOf(t, postOrder(t, e, e.Secret, "k-down", orderBody(9001, "tok_visa_2")), 422, "idempotency_key_reused")

	down.Store(false)
	replayOf(t, postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_visa_2")), first)
	problemOf(t, postOrder(t, e, e.Secret, "k-down", orderBody(9000, "tok_mastercard_2")), 422, "idempotency_key_reused")
	if n := remoteCharges(); n != 2 {
		t.Fatalf("%d charges, want 2 (one a key)", n)
	}
}

// TestRetokenizedLateRetry: after expiry, and after the sweep leaves a tombstone, a retry
// with a new token of the same card is still the same purchase (safe_new_key false: do
// not pay again), and one with another card is another purchase.
func TestRetokenizedLateRetry(t *testing.T) {
	e := apptest.New(t)
	secret, id := e.NewClient(t, "short ttl")
	if _, err := e.DB.Exec(`UPDATE clients SET key_ttl = interval '1 hour' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	first := postOrder(t, e, secret, "k-late", orderBody(9000, "tok_visa_1"))
	if first.Status != 201 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	e.Clock.Advance(2 * time.Hour)
	check := func(when string) {
		t.Helper()
		p := problemOf(t, postOrder(t, e, secret, "k-late", orderBody(9000, "tok_visa_2")), 422, "idempotency_key_expired")
		if p["safe_new_key"] != false || p["order_id"] != decodeOrder(t, first).ID {
			t.Fatalf("%s: a new token of the same card: %v", when, p)
		}
		p = problemOf(t, postOrder(t, e, secret, "k-late", orderBody(9000, "tok_mastercard_2")), 422, "idempotency_key_expired")
		if p["safe_new_key"] != true {
			t.Fatalf("%s: another card: %v", when, p)
		}
	}
	check("expired")
	sweepAll(t, e)
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-late'`); n != 0 {
		t.Fatalf("the key row was not swept")
	}
	check("swept")
	if n := count(t, e, `SELECT count(*) FROM key_tombstones WHERE key = 'k-late' AND card_fingerprint IS NOT NULL`); n != 1 {
		t.Fatalf("the tombstone does not keep the card (%d rows)", n)
	}
}

// sweepAll runs the sweeper until the expired keys are tombstones only.
func sweepAll(t *testing.T, e *apptest.Env) {
	t.Helper()
	sweep(t, e)
	e.Clock.Advance(2 * time.Minute)
	sweep(t, e)
}

// TestRetokenizedRetryResumes: the first attempt's charge was made but its answer lost;
// the retry, with a new token of the same card, resumes the key, finds the charge by the
// derived provider key and charges nothing again.
func TestRetokenizedRetryResumes(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.ProviderTimeout = 200 * time.Millisecond })
	problemOf(t, postOrder(t, e, e.Secret, "k-resume", orderBody(9000, "tok_timeout_1")), 503, "payment_pending")
	if n := charged(t, e); n != 1 {
		t.Fatalf("%d charges after the lost answer, want 1", n)
	}
	again := postOrder(t, e, e.Secret, "k-resume", orderBody(9000, "tok_timeout_2"))
	if again.Status != 201 || decodeOrder(t, again).Status != "paid" || again.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("retry: %d %s", again.Status, again.Body)
	}
	replayOf(t, postOrder(t, e, e.Secret, "k-resume", orderBody(9000, "tok_timeout_3")), again)
	if c, o := charged(t, e), clientOrders(t, e); c != 1 || o != 1 {
		t.Fatalf("%d charges and %d orders, want 1 and 1", c, o)
	}
}
