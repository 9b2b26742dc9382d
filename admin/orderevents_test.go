package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// missedWebhook is the complaint "a merchant never got order.paid for order X", in the
// database: an order whose order.paid was attempted once at each of two endpoints of its
// client, one answering 500 (with markup in its answer), the other 200.
type missedWebhook struct {
	order, event         string
	failing, working     string // the endpoints' public ids
	failingID, workingID int64  // their deliveries
}

// newMissedWebhook makes a missedWebhook on e through the API and the deliveries' own
// fan-out and attempts (e runs no job workers).
func newMissedWebhook(t *testing.T, e *apptest.Env) missedWebhook {
	t.Helper()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<b>boom</b> database is down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	working := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(working.Close)
	var m missedWebhook
	for _, ep := range []struct {
		url string
		id  *string
	}{{failing.URL, &m.failing}, {working.URL, &m.working}} {
		r := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"`+ep.url+`","event_types":["order.paid"]}`),
			"Content-Type", "application/json")
		var out struct{ ID string }
		if err := json.Unmarshal(r.Body, &out); err != nil || r.Status != http.StatusCreated {
			t.Fatalf("endpoint: %d %s", r.Status, r.Body)
		}
		*ep.id = out.ID
	}
	r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(`{"currency":"TRY","items":[{"sku":"X","name":"Latte","quantity":1,"unit_amount":9000}],
		"amount":9000,"payment":{"card_token":"tok_visa"}}`), "Idempotency-Key", "missed-1")
	var o struct{ ID string }
	if err := json.Unmarshal(r.Body, &o); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	m.order = o.ID
	ctx := context.Background()
	if err := e.DB.Get(&m.event, `SELECT id FROM outbox_events WHERE type = 'order.paid'
		AND order_id = (SELECT id FROM orders WHERE public_id = $1)`, m.order); err != nil {
		t.Fatal(err)
	}
	ev, err := outbox.Get(ctx, e.DB, m.event)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deliveries.CreateDeliveries(ctx, tx, ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	d := &deliveries.Deliverer{DB: e.DB, Client: deliveries.NewHTTPClient(deliveries.Policy{AllowLoopback: true}, time.Second)}
	d.Sealer, _ = deliveries.NewSealer(e.Config.SecretsKey)
	for _, ep := range []struct {
		public string
		id     *int64
		want   string
	}{{m.failing, &m.failingID, deliveries.StatePending}, {m.working, &m.workingID, deliveries.StateSucceeded}} {
		if err := e.DB.Get(ep.id, `SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
			WHERE d.event_id = $1 AND w.public_id = $2`, m.event, ep.public); err != nil {
			t.Fatal(err)
		}
		if out, err := d.Attempt(ctx, *ep.id, false); err != nil || out.State != ep.want {
			t.Fatalf("attempt at %s: %+v %v, want %s", ep.public, out, err, ep.want)
		}
	}
	return m
}

// The order page answers "a merchant never got order.paid": the order's events, each with
// its delivery to each endpoint as the database holds it (state, attempts, the last answer
// as text, the next attempt), and an admin's redelivery; the Events page does not call an
// event delivered that one endpoint has not taken, and links it to the order's section; the
// endpoint's page links the order.
func TestOrderPageShowsEachEventsDeliveries(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) {
		c.SecretsKey = deliveries.NewSecretsKey()
		c.WebhooksAllowLoopback = true
	})
	m := newMissedWebhook(t, e)
	var held struct {
		Attempts int       `db:"attempts"`
		Next     time.Time `db:"next_attempt_at"`
	}
	if err := e.DB.Get(&held, `SELECT attempts, next_attempt_at FROM webhook_deliveries WHERE id = $1`, m.failingID); err != nil {
		t.Fatal(err)
	}

	b := actSignIn(t, e, "admin@example.com", admin.RoleAdmin)
	p := b.do("GET", "/admin/orders/"+m.order, nil)
	if p.status != http.StatusOK {
		t.Fatalf("order page: %d %s", p.status, p.body)
	}
	block := p.doc.Find(`section.event-block[id="` + m.event + `"]`)
	if block.Length() != 1 || !strings.Contains(block.Text(), "order.paid") || !strings.Contains(block.Text(), "sequence 1") {
		t.Fatalf("no block for the order.paid event %s: %s", m.event, p.body)
	}
	if got := strings.Join(strings.Fields(block.Find("p .state").Text()), " "); got != "dispatched · 1 of 2 delivered, 1 retrying" {
		t.Errorf("the event's summary: %q", got)
	}
	rows := map[string][]string{}
	block.Find("table.event-deliveries tbody tr").Each(func(_ int, tr *goquery.Selection) {
		var cells []string
		tr.Find("td").Each(func(_ int, td *goquery.Selection) {
			cells = append(cells, strings.Join(strings.Fields(td.Text()), " "))
		})
		rows[tr.Find("td a code").First().Text()] = cells
	})
	fail, ok := rows[m.failing]
	if !ok || len(fail) != 7 || fail[1] != "retrying" || fail[2] != strconv.Itoa(held.Attempts) ||
		!strings.HasPrefix(fail[3], "HTTP 500") || !strings.Contains(fail[3], "<b>boom</b> database is down") {
		t.Errorf("the failing endpoint's row: %q", fail)
	}
	if next, _ := block.Find(`a[href="/admin/webhooks/` + m.failing + `"]`).Closest("tr").Find("td").Eq(5).Find("time").Attr("datetime"); next != held.Next.UTC().Format(time.RFC3339Nano) {
		t.Errorf("next attempt shown %q, held %s", next, held.Next.UTC().Format(time.RFC3339Nano))
	}
	if strings.Contains(p.body, "<b>boom</b>") {
		t.Error("the endpoint's answer is rendered as markup")
	}
	if w := rows[m.working]; len(w) != 7 || w[1] != "delivered" || w[2] != "1" || !strings.HasPrefix(w[3], "HTTP 200") || w[5] != "—" {
		t.Errorf("the working endpoint's row: %q", w)
	}
	for _, id := range []int64{m.failingID, m.workingID} {
		if block.Find(`a[href="/admin/webhooks/deliveries/`+strconv.FormatInt(id, 10)+`/redeliver"]`).Length() != 1 {
			t.Errorf("no redeliver button for delivery %d", id)
		}
	}
	viewer := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	if v := viewer.do("GET", "/admin/orders/"+m.order, nil); v.doc.Find(`a[href*="/redeliver"]`).Length() != 0 ||
		v.doc.Find("table.event-deliveries tbody tr").Length() != 2 {
		t.Error("a viewer is offered the redelivery, or does not see the deliveries")
	}

	events := b.do("GET", "/admin/events?order="+m.order, nil)
	var paid *goquery.Selection
	events.doc.Find("table.outbox tbody tr").Each(func(_ int, tr *goquery.Selection) {
		if strings.Contains(tr.Text(), m.event) {
			paid = tr
		}
	})
	if paid == nil {
		t.Fatalf("the events page does not list %s: %s", m.event, events.body)
	}
	if got := strings.Join(strings.Fields(paid.Find(".state").Text()), " "); got != "dispatched · 1 of 2 delivered, 1 retrying" {
		t.Errorf("the events page says %q", got)
	}
	if href, _ := paid.Find("a code").First().Parent().Attr("href"); href != "/admin/orders/"+m.order+"#"+m.event {
		t.Errorf("the event id links to %q", href)
	}

	ep := b.do("GET", "/admin/webhooks/"+m.failing, nil)
	row := ep.doc.Find(`table.deliveries tbody tr`).First()
	if row.Find(`a[href="/admin/orders/`+m.order+`"]`).Length() != 1 ||
		row.Find(`a[href="/admin/orders/`+m.order+`#`+m.event+`"]`).Length() != 1 ||
		!strings.Contains(row.Find(".state").Text(), "retrying") {
		t.Errorf("the endpoint's delivery does not link its order and event, or is not retrying: %s", ep.body)
	}
}
