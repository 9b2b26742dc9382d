package api_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

type endpointBody struct {
	ID         string   `json:"id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	Status     string   `json:"status"`
	Secret     string   `json:"secret"`
	Previous   string   `json:"previous_secret_expires_at"`
}

func decodeEndpoint(t *testing.T, r apptest.Response) endpointBody {
	t.Helper()
	var e endpointBody
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("%d %s: %v", r.Status, r.Body, err)
	}
	return e
}

func withSecretsKey(c *config.Server) { c.SecretsKey = deliveries.NewSecretsKey() }

// The endpoints API: create shows the secret once, reads never do; rotation shows the new
// one and reports the overlap; another client sees none of it (404); delete ends it.
func TestWebhookEndpointsAPI(t *testing.T) {
	e := apptest.New(t, withSecretsKey)
	const url = "https://93.184.215.14/hooks"
	created := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"`+url+`","event_types":["order.paid","order.refunded"]}`),
		"Content-Type", "application/json")
	ep := decodeEndpoint(t, created)
	if created.Status != 201 || !deliveries.ValidEndpointID(ep.ID) || !strings.HasPrefix(ep.Secret, "whsec_") || ep.Status != "enabled" ||
		ep.URL != url || created.Header.Get("Location") != "/v1/webhook-endpoints/"+ep.ID {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	got := e.Do(t, "GET", "/v1/webhook-endpoints/"+ep.ID, e.Secret, nil)
	if got.Status != 200 || decodeEndpoint(t, got).Secret != "" || strings.Contains(string(got.Body), ep.Secret) {
		t.Fatalf("get shows: %d %s", got.Status, got.Body)
	}
	list := e.Do(t, "GET", "/v1/webhook-endpoints", e.Secret, nil)
	if list.Status != 200 || !strings.Contains(string(list.Body), ep.ID) || strings.Contains(string(list.Body), "whsec_") {
		t.Fatalf("list: %d %s", list.Status, list.Body)
	}
	rot := e.Do(t, "POST", "/v1/webhook-endpoints/"+ep.ID+"/rotate-secret", e.Secret, []byte(`{"overlap_seconds":3600}`), "Content-Type", "application/json")
	r := decodeEndpoint(t, rot)
	if rot.Status != 200 || r.Secret == "" || r.Secret == ep.Secret || r.Previous == "" {
		t.Fatalf("rotate: %d %s", rot.Status, rot.Body)
	}

	other, _ := e.NewClient(t, "another app")
	for _, req := range [][2]string{{"GET", "/v1/webhook-endpoints/" + ep.ID}, {"DELETE", "/v1/webhook-endpoints/" + ep.ID},
		{"POST", "/v1/webhook-endpoints/" + ep.ID + "/rotate-secret"}} {
		if res := e.Do(t, req[0], req[1], other, nil); res.Status != 404 || !strings.Contains(string(res.Body), `"webhook_endpoint_not_found"`) {
			t.Errorf("another client's %s %s: %d %s", req[0], req[1], res.Status, res.Body)
		}
	}
	if res := e.Do(t, "GET", "/v1/webhook-endpoints", other, nil); res.Status != 200 || string(res.Body) != `{"data":[]}` {
		t.Errorf("another client's list: %d %s", res.Status, res.Body)
	}
	if res := e.Do(t, "DELETE", "/v1/webhook-endpoints/"+ep.ID, e.Secret, nil); res.Status != 204 {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	if res := e.Do(t, "GET", "/v1/webhook-endpoints/"+ep.ID, e.Secret, nil); res.Status != 404 {
		t.Fatalf("get after delete: %d %s", res.Status, res.Body)
	}
}

// Refused endpoints: each a 422 naming the field, nothing stored.
func TestWebhookEndpointValidation(t *testing.T) {
	e := apptest.New(t, withSecretsKey)
	cases := []struct{ body, field string }{
		{`{"url":"http://93.184.215.14/","event_types":["order.paid"]}`, "url"},
		{`{"url":"https://127.0.0.1/","event_types":["order.paid"]}`, "url"},
		{`{"url":"https://10.1.2.3/","event_types":["order.paid"]}`, "url"},
		{`{"url":"https://169.254.169.254/","event_types":["order.paid"]}`, "url"},
		{`{"url":"https://[::1]/","event_types":["order.paid"]}`, "url"},
		{`{"url":"https://[fd00::1]/","event_types":["order.paid"]}`, "url"},
		{`{"url":"https://localhost/","event_types":["order.paid"]}`, "url"},
		{`{"url":"https://93.184.215.14/","event_types":[]}`, "event_types"},
		{`{"url":"https://93.184.215.14/","event_types":["order.exploded"]}`, "event_types"},
		{`{"url":"https://93.184.215.14/","event_types":["order.paid","order.paid"]}`, "event_types"},
	}
	for _, c := range cases {
		res := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(c.body), "Content-Type", "application/json")
		if res.Status != 422 || !strings.Contains(string(res.Body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s", c.body, res.Status, res.Body)
		}
	}
	if res := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"https://93.184.215.14/","event_types":["order.paid"],"extra":1}`),
		"Content-Type", "application/json"); res.Status != 422 {
		t.Errorf("an unknown member: %d %s", res.Status, res.Body)
	}
	var n int
	if err := e.DB.Get(&n, `SELECT count(*) FROM webhook_endpoints`); err != nil || n != 0 {
		t.Fatalf("%d endpoints stored by refused requests (%v)", n, err)
	}
}

// Without TEKRAR_SECRETS_KEY, serve refuses to create an endpoint, and says why.
func TestWebhookEndpointsNeedTheSecretsKey(t *testing.T) {
	e := apptest.New(t)
	res := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"https://93.184.215.14/","event_types":["order.paid"]}`),
		"Content-Type", "application/json")
	if res.Status != 503 || !strings.Contains(string(res.Body), `"webhook_secrets_key_missing"`) {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
}

// Resend of a window: the events of the window the endpoint is subscribed to are queued
// once (the same call again queues none), a disabled endpoint is enabled, another client's
// endpoint is 404, and a window that is missing, reversed, unparsable or older than 30 days
// is 422 validation_failed naming the field.
func TestWebhookEndpointResendAPI(t *testing.T) {
	e := apptest.New(t, withSecretsKey)
	created := e.Do(t, "POST", "/v1/webhook-endpoints", e.Secret, []byte(`{"url":"https://93.184.215.14/hooks","event_types":["order.paid"]}`),
		"Content-Type", "application/json")
	ep := decodeEndpoint(t, created)
	if created.Status != 201 {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	if _, err := e.DB.Exec(`UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'test' WHERE public_id = $1`, ep.ID); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	since := time.Now().Add(-time.Minute).UTC()
	for i := range 3 {
		if _, err := outbox.Insert(ctx, e.DB, e.ClientID, outbox.OrderPaid, sql.NullInt64{}, map[string]any{"order": i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := outbox.Insert(ctx, e.DB, e.ClientID, outbox.OrderRefunded, sql.NullInt64{}, map[string]any{"order": 9}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Minute).UTC()
	window := []byte(`{"since":"` + since.Format(time.RFC3339) + `","until":"` + until.Format(time.RFC3339) + `"}`)
	path := "/v1/webhook-endpoints/" + ep.ID + "/resend"
	for i, want := range []string{`"events":3,"queued":3,"reenabled":true`, `"events":3,"queued":0,"reenabled":false`} {
		res := e.Do(t, "POST", path, e.Secret, window, "Content-Type", "application/json")
		if res.Status != 200 || !strings.Contains(string(res.Body), want) {
			t.Fatalf("resend %d: %d %s, want %s", i+1, res.Status, res.Body, want)
		}
	}
	if got := decodeEndpoint(t, e.Do(t, "GET", "/v1/webhook-endpoints/"+ep.ID, e.Secret, nil)); got.Status != "enabled" {
		t.Errorf("after the resend the endpoint is %s", got.Status)
	}
	var jobs int
	if err := e.DB.Get(&jobs, `SELECT count(*) FROM river_job WHERE kind = 'webhook_delivery'`); err != nil || jobs != 3 {
		t.Errorf("%d delivery jobs (%v), want 3", jobs, err)
	}

	other, _ := e.NewClient(t, "another app")
	if res := e.Do(t, "POST", path, other, window, "Content-Type", "application/json"); res.Status != 404 ||
		!strings.Contains(string(res.Body), `"webhook_endpoint_not_found"`) {
		t.Errorf("another client's resend: %d %s", res.Status, res.Body)
	}
	old := time.Now().Add(-31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct{ body, field string }{
		{`{"until":"` + until.Format(time.RFC3339) + `"}`, "since"},
		{`{"since":"` + since.Format(time.RFC3339) + `"}`, "until"},
		{`{"since":"yesterday","until":"` + until.Format(time.RFC3339) + `"}`, "since"},
		{`{"since":"` + until.Format(time.RFC3339) + `","until":"` + since.Format(time.RFC3339) + `"}`, "until"},
		{`{"since":"` + old + `","until":"` + until.Format(time.RFC3339) + `"}`, "since"},
	} {
		res := e.Do(t, "POST", path, e.Secret, []byte(c.body), "Content-Type", "application/json")
		if res.Status != 422 || !strings.Contains(string(res.Body), `"validation_failed"`) || !strings.Contains(string(res.Body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s", c.body, res.Status, res.Body)
		}
	}
}
