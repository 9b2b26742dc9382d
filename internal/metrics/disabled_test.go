package metrics_test

import (
	"testing"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/internal/apptest"
)

// A disabled endpoint shows in tekrar_webhook_endpoints_disabled (read from Postgres, a
// deleted one not), and the attempt that disabled it in tekrar_webhook_endpoints_disabled_total.
func TestDisabledEndpointsCounted(t *testing.T) {
	e := apptest.New(t)
	for _, deleted := range []string{"NULL", "now()"} {
		e.DB.MustExec(`INSERT INTO webhook_endpoints (client_id, url, event_types, created_at, disabled_at, disabled_reason, deleted_at)
		               VALUES ($1, 'https://93.184.215.14/', '{order.paid}', now(), now(), 'failed', `+deleted+`)`, e.ClientID)
	}
	_, fams := scrape(t, e)
	if got := value(fams, "tekrar_webhook_endpoints_disabled"); got != 1 {
		t.Errorf("tekrar_webhook_endpoints_disabled = %v, want 1 (the deleted one is not counted)", got)
	}
	if _, ok := fams["tekrar_webhook_endpoints_disabled_total"]; !ok {
		t.Error("tekrar_webhook_endpoints_disabled_total is not exported before any disabling")
	}
	e.App.Metrics.Delivery(deliveries.Outcome{State: deliveries.StateDead, Attempted: true, Disabled: true}, nil)
	e.App.Metrics.Delivery(deliveries.Outcome{State: deliveries.StateDead, Attempted: true}, nil)
	_, fams = scrape(t, e)
	if got := value(fams, "tekrar_webhook_endpoints_disabled_total"); got != 1 {
		t.Errorf("tekrar_webhook_endpoints_disabled_total = %v, want 1", got)
	}
}
