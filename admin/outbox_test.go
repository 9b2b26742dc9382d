package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/internal/apptest"
)

// The events page lists the outbox's events with their dispatch state, narrowed by order
// (the order page links there), type or client; a filter that names nothing possible is a
// 400 that says why, and what an event holds is shown as text, never as markup.
func TestEventsPage(t *testing.T) {
	e := apptest.New(t)
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	var ids []string
	for _, key := range []string{"k-1", "k-2"} {
		r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":9000}],
			"amount":9000,"payment":{"card_token":"tok_visa"}}`), "Idempotency-Key", key)
		if r.Status != http.StatusCreated {
			t.Fatalf("order: %d %s", r.Status, r.Body)
		}
		var o struct{ ID string }
		if err := json.Unmarshal(r.Body, &o); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	if r := e.Do(t, "POST", "/v1/orders/"+ids[0]+"/refunds", e.Secret, []byte(`{"amount":100}`), "Idempotency-Key", "k-r"); r.Status != http.StatusCreated {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	// A dispatch that failed once, with an error naming markup; its retry an hour away.
	if _, err := e.DB.Exec(`INSERT INTO outbox_queue (event_id, attempts, last_error, available_at)
		SELECT id, 1, '<script>alert(1)</script>', now() + interval '1 hour' FROM outbox_events WHERE type = 'refund.created'
		ON CONFLICT (event_id) DO UPDATE SET attempts = 1, last_error = excluded.last_error, available_at = excluded.available_at`); err != nil {
		t.Fatal(err)
	}

	all := b.do("GET", "/admin/events", nil)
	if all.status != http.StatusOK {
		t.Fatalf("events: %d %s", all.status, all.body)
	}
	if n := all.doc.Find("table.outbox tbody tr").Length(); n != 4 {
		t.Errorf("%d events listed, want 4 (two paid, a refund created, an order refunded)", n)
	}
	if strings.Contains(all.body, "<script>alert(1)</script>") || !strings.Contains(all.body, "failed, will retry") {
		t.Error("the failed dispatch is not shown, or its error is rendered as markup")
	}

	one := b.do("GET", "/admin/events?order="+ids[0], nil)
	if n := one.doc.Find("table.outbox tbody tr").Length(); n != 3 {
		t.Errorf("order %s: %d events, want 3", ids[0], n)
	}
	if strings.Contains(one.body, ids[1]) {
		t.Error("another order's event is listed")
	}
	typ := b.do("GET", "/admin/events?type=order.paid&client=1", nil)
	if n := typ.doc.Find("table.outbox tbody tr").Length(); n != 2 {
		t.Errorf("order.paid of client 1: %d events, want 2", n)
	}
	if href, _ := b.do("GET", "/admin/orders/"+ids[0], nil).doc.Find(`a[href="/admin/events?order=` + ids[0] + `"]`).Attr("href"); href == "" {
		t.Error("the order page does not link to its events")
	}
	for _, q := range []string{"type=order.shipped", "client=x", "order=1"} {
		if p := b.do("GET", "/admin/events?"+q, nil); p.status != http.StatusBadRequest || p.doc.Find("p.error").Length() != 1 {
			t.Errorf("%s: %d, want 400 with the reason", q, p.status)
		}
	}
}
