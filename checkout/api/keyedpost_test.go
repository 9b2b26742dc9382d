package api_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/apptest"
)

// Every keyed POST runs one protocol: a repeat of a completed request is answered from its
// stored response before the body is decoded and validated, so that a repeat costs one
// SELECT. To see the order of the steps from outside, the stored fingerprint is made that
// of a body that fails validation: its repeat must still be replayed, on every keyed route.
func TestKeyedPostsReplayBeforeValidating(t *testing.T) {
	e := apptest.New(t)
	orderID := paidOrder(t, e, "k-paid", 9000)
	tests := []struct {
		name          string
		path          string
		valid, broken []byte // broken fails validation
	}{
		{"orders", "/v1/orders", orderBody(4500, "tok_visa"), orderBody2(4500, 9000)},
		{"refunds", "/v1/orders/" + orderID + "/refunds", []byte(`{"amount":1000}`), []byte(`{"amount":0}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.Do(t, "POST", tt.path, e.Secret, tt.broken, "Idempotency-Key", "k-broken-"+tt.name); r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("the broken body is not refused: %d %s", r.Status, r.Body)
			}
			key := "k-" + tt.name
			first := e.Do(t, "POST", tt.path, e.Secret, tt.valid, "Idempotency-Key", key)
			if first.Status != http.StatusCreated {
				t.Fatalf("first: %d %s", first.Status, first.Body)
			}
			fp, err := checkout.Fingerprint("POST", tt.path, tt.broken)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.DB.Exec(`UPDATE idempotency_keys SET fingerprint = $3 WHERE client_id = $1 AND key = $2`,
				e.ClientID, key, fp[:]); err != nil {
				t.Fatal(err)
			}
			r := e.Do(t, "POST", tt.path, e.Secret, tt.broken, "Idempotency-Key", key)
			if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, first.Body) {
				t.Fatalf("repeat: %d replayed %q %s; want the stored answer, before validation", r.Status,
					r.Header.Get("Idempotent-Replayed"), r.Body)
			}
		})
	}
}
