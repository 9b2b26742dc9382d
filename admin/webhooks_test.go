package admin_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// A delivery that died on a failing endpoint is shown with its attempts and the endpoint's
// disabled notice; an admin's redelivery is audited once however often its form is posted,
// queues one job, and that job sends the same webhook-id again.
func TestRedeliverADeadWebhook(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) {
		c.SecretsKey = deliveries.NewSecretsKey()
		c.WebhooksAllowLoopback = true
	})
	var up atomic.Bool
	var mu sync.Mutex
	var ids []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		mu.Unlock()
		if !up.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer rcv.Close()
	created := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"`+rcv.URL+`","event_types":["order.paid"]}`),
		"Content-Type", "application/json")
	var ep struct{ ID string }
	if err := json.Unmarshal(created.Body, &ep); err != nil || created.Status != 201 {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	ctx := context.Background()
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := outbox.Event{ID: "evt_0123456789abcdef0123456789abcdef", Type: outbox.OrderPaid, ClientID: e.ClientID,
		CreatedAt: time.Now().Add(-4 * 24 * time.Hour), Payload: []byte(`{"order":"ord_x"}`)}
	dids, err := deliveries.CreateDeliveries(ctx, tx, ev)
	if err != nil || len(dids) != 1 {
		t.Fatalf("fan-out: %v %v", dids, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	sealer, _ := deliveries.NewSealer(e.Config.SecretsKey)
	d := &deliveries.Deliverer{DB: e.DB, Sealer: sealer, Client: deliveries.NewHTTPClient(deliveries.Policy{AllowLoopback: true}, time.Second)}
	if out, err := d.Attempt(ctx, dids[0], false); err != nil || out.State != deliveries.StateDead {
		t.Fatalf("an attempt past the horizon: %+v %v", out, err)
	}

	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	list := b.do("GET", "/admin/webhooks", nil)
	if list.status != 200 || !strings.Contains(list.doc.Find(`[role=alert]`).Text(), "1 endpoint(s) disabled") ||
		!strings.Contains(list.doc.Find("table.deliveries").Text(), ev.ID) {
		t.Fatalf("webhooks page: %d %s", list.status, list.body)
	}
	redeliver := "/admin/webhooks/deliveries/" + strconv.FormatInt(dids[0], 10) + "/redeliver"
	if list.doc.Find(`a[href="`+redeliver+`"]`).Length() != 1 {
		t.Fatal("no redeliver button on the dead delivery")
	}
	page := b.do("GET", "/admin/webhooks/"+ep.ID, nil)
	if page.status != 200 || !strings.Contains(page.doc.Find(".warning").Text(), "503") {
		t.Fatalf("endpoint page: %d %s", page.status, page.body)
	}
	form := actForm(t, b.do("GET", redeliver, nil), redeliver)
	for i, want := range []string{"redelivery-queued", "redelivery-queued-already"} {
		p := b.do("POST", redeliver, form)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/admin/webhooks/"+ep.ID+"?done="+want {
			t.Fatalf("post %d: %d %s", i+1, p.status, p.header.Get("Location"))
		}
	}
	if n := actInt(t, e, `SELECT count(*) FROM audit_log WHERE action = 'redeliver_webhook' AND target = $1`, "webhook_delivery:"+strconv.FormatInt(dids[0], 10)); n != 1 {
		t.Fatalf("%d audit records, want 1", n)
	}
	if n := actInt(t, e, `SELECT count(*) FROM river_job WHERE kind = 'webhook_delivery' AND args->>'manual' = 'true'`); n != 1 {
		t.Fatalf("%d redelivery jobs, want 1", n)
	}
	// What the job does, with the endpoint back up.
	up.Store(true)
	if out, err := d.Attempt(ctx, dids[0], true); err != nil || out.State != deliveries.StateSucceeded {
		t.Fatalf("the redelivery: %+v %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != ev.ID || ids[1] != ev.ID {
		t.Fatalf("webhook-ids sent: %v, want the event's id twice", ids)
	}
	if n := actInt(t, e, `SELECT count(*) FROM webhook_attempts WHERE manual`); n != 1 {
		t.Fatalf("%d manual attempts recorded", n)
	}
}

// An admin resends a disabled endpoint's window from its page, which shows the client's
// contact e-mail (or that it has none): the form is prefilled from
// the disabling, the post enables the endpoint and queues each missed event once, the same
// form posted again is audited and queued once, a viewer has no button, and a bad window is
// refused on the form.
func TestResendAWindowFromTheConsole(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.SecretsKey = deliveries.NewSecretsKey() })
	created := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"https://93.184.215.14/hooks","event_types":["order.paid"]}`),
		"Content-Type", "application/json")
	var ep struct{ ID string }
	if err := json.Unmarshal(created.Body, &ep); err != nil || created.Status != 201 {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	e.DB.MustExec(`UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'every delivery failed' WHERE public_id = $1`, ep.ID)
	ctx := context.Background()
	for i := range 2 {
		if _, err := outbox.Insert(ctx, e.DB, e.ClientID, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": i}); err != nil {
			t.Fatal(err)
		}
	}
	resend := "/admin/webhooks/" + ep.ID + "/resend"
	viewer := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	if p := viewer.do("GET", "/admin/webhooks/"+ep.ID, nil); p.doc.Find(`a[href="`+resend+`"]`).Length() != 0 {
		t.Error("a viewer is offered the resend")
	}
	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	if p := b.do("GET", "/admin/webhooks/"+ep.ID, nil); p.doc.Find(`a[href="`+resend+`"]`).Length() != 1 ||
		!strings.Contains(p.doc.Find("dl.fields").Text(), "none: a disabling is told to nobody") {
		t.Fatalf("no resend button, or no word of the missing contact, on the endpoint page: %s", p.body)
	}
	e.DB.MustExec(`UPDATE clients SET contact_email = 'ops@shop.example' WHERE id = $1`, e.ClientID)
	if p := b.do("GET", "/admin/webhooks/"+ep.ID, nil); !strings.Contains(p.doc.Find("dl.fields").Text(), "ops@shop.example") {
		t.Fatalf("the endpoint page does not show its client's contact e-mail: %s", p.body)
	}
	formPage := b.do("GET", resend, nil)
	bad := actForm(t, formPage, resend, "until", "yesterday")
	if p := b.do("POST", resend, bad); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.doc.Find(".error").Text(), "until must be") {
		t.Fatalf("a bad window: %d %s", p.status, p.body)
	}
	form := actForm(t, formPage, resend)
	for i, want := range []string{"resend-queued", "resend-queued-already"} {
		p := b.do("POST", resend, form)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/admin/webhooks/"+ep.ID+"?done="+want {
			t.Fatalf("post %d: %d %s %s", i+1, p.status, p.header.Get("Location"), p.body)
		}
	}
	if n := actInt(t, e, `SELECT count(*) FROM audit_log WHERE action = 'resend_webhook_window' AND target = $1`, "webhook_endpoint:"+ep.ID); n != 1 {
		t.Errorf("%d audit records, want 1", n)
	}
	if n := actInt(t, e, `SELECT count(*) FROM river_job WHERE kind = 'webhook_delivery'`); n != 2 {
		t.Errorf("%d delivery jobs, want one per missed event (2)", n)
	}
	if n := actInt(t, e, `SELECT count(*) FROM webhook_endpoints WHERE public_id = $1 AND disabled_at IS NULL`, ep.ID); n != 1 {
		t.Error("the endpoint is still disabled")
	}
	// A new form for the same window queues nothing more.
	if p := b.do("POST", resend, actForm(t, b.do("GET", resend, nil), resend, "since", form.Get("since"), "until", form.Get("until"))); p.status != http.StatusSeeOther {
		t.Fatalf("a second form: %d %s", p.status, p.body)
	}
	if n := actInt(t, e, `SELECT count(*) FROM river_job WHERE kind = 'webhook_delivery'`); n != 2 {
		t.Errorf("%d delivery jobs after a second form, want 2", n)
	}
}
