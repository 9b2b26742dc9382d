package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// What a client and an operator see of a key at its expiry boundary must agree with the
// domain's one rule (checkout.KeyExpired; the domain's paths are checked in
// checkout.TestKeyExpiryBoundary): the retry, the key status endpoint, the console's key
// page and its expire form. The console wrote the comparison out on its own, three times.
func TestKeyExpiryBoundaryAsSeen(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	now := e.Clock.Stop()
	tests := []struct {
		name    string
		left    time.Duration // expires_at - now
		expired bool
	}{
		{"a microsecond before expires_at", time.Microsecond, false},
		{"exactly at expires_at", 0, true},
		{"a microsecond after expires_at", -time.Microsecond, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k-expiry-%d", i)
			body := []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":4500}],
				"amount":4500,"payment":{"card_token":"tok_visa"}}`)
			if r := e.Do(t, "POST", "/v1/orders", e.Secret, body, "Idempotency-Key", key); r.Status != http.StatusCreated {
				t.Fatalf("order: %d %s", r.Status, r.Body)
			}
			if _, err := e.DB.Exec(`UPDATE idempotency_keys SET expires_at = $3 WHERE client_id = $1 AND key = $2`,
				e.ClientID, key, now.Add(tt.left)); err != nil {
				t.Fatal(err)
			}

			r := e.Do(t, "POST", "/v1/orders", e.Secret, body, "Idempotency-Key", key)
			var p struct{ Code string }
			_ = json.Unmarshal(r.Body, &p)
			refused := r.Status == http.StatusUnprocessableEntity && p.Code == "idempotency_key_expired"
			replayed := r.Status == http.StatusCreated && r.Header.Get("Idempotent-Replayed") == "true"
			if refused != tt.expired || replayed == tt.expired {
				t.Errorf("retry: %d %s, want expired %v", r.Status, r.Body, tt.expired)
			}

			r = e.Do(t, "GET", "/v1/idempotency-keys/"+url.PathEscape(key), e.Secret, nil)
			var v struct{ Expired bool }
			if err := json.Unmarshal(r.Body, &v); err != nil || r.Status != http.StatusOK || v.Expired != tt.expired {
				t.Errorf("key status: %d %s, want expired %v", r.Status, r.Body, tt.expired)
			}

			keyPage := keyPath(e, key)
			expirePage := keyPage + "/expire"
			kp := b.do("GET", keyPage, nil)
			if offered := kp.doc.Find(`#key-actions a[href="`+expirePage+`"]`).Length() == 1; kp.status != http.StatusOK || offered == tt.expired {
				t.Errorf("key page: %d, offers to expire: %v, want expired %v", kp.status, offered, tt.expired)
			}
			ep := b.do("GET", expirePage, nil)
			if form := ep.doc.Find(`form[action="`+expirePage+`"]`).Length() == 1; ep.status != http.StatusOK || form == tt.expired {
				t.Errorf("expire form: %d, offered: %v, want expired %v", ep.status, form, tt.expired)
			}
		})
	}
}
