package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/tekrar/tekrar/checkout/psp/stripe"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

const stripeWebhookSecret = "whsec_test_tekrar"

// stripeEvent is the body of a Stripe event of type typ whose data.object is object.
func stripeEvent(t *testing.T, id, typ string, created time.Time, object map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": stripego.APIVersion,
		"created": created.Unix(), "type": typ, "livemode": false, "data": map[string]any{"object": object}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deliverStripe posts body to /webhooks/stripe signed under secret at signedAt by stripe-go's
// test helper; it returns the status and the outcome (or problem code).
func deliverStripe(t *testing.T, e *apptest.Env, body []byte, secret string, signedAt time.Time) (int, string) {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: signedAt})
	req, err := http.NewRequest("POST", e.URL+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(stripe.SignatureHeader, signed.Header)
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct{ Outcome, Code string }
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out.Outcome + out.Code
}

// A charge whose answer was lost (tok_timeout) is settled by Stripe's
// payment_intent.succeeded, delivered to POST /webhooks/stripe: the order is paid once, the
// key replays it, however often the event comes; a refund made at Stripe (charge.refunded)
// appears on the order. A delivery whose Stripe-Signature does not verify is 400
// webhook_signature_invalid and stores nothing.
func TestStripeWebhookSettlesAPendingPayment(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) {
		c.StripeWebhookSecret = stripeWebhookSecret
		c.ProviderTimeout = 300 * time.Millisecond // tok_timeout answers within it
	})
	body := orderBody(9000, "tok_timeout")
	problemOf(t, postOrder(t, e, e.Secret, "k-stripe", body), 503, "payment_pending")
	var ch struct {
		ID          string `db:"id"`
		Key         string `db:"key"`
		Description string `db:"description"`
	}
	if err := e.DB.Get(&ch, `
		SELECT ch.id, ch.key, ch.description FROM psp_charges ch
		  JOIN orders o ON ch.description = 'order ' || o.public_id
		  JOIN idempotency_keys k ON k.order_id = o.id
		 WHERE k.key = 'k-stripe'`); err != nil {
		t.Fatalf("the charge made: %v", err)
	}
	// The charge as Stripe would tell of it: its PaymentIntent, with tekrar's key in its metadata.
	now := time.Now()
	succeeded := stripeEvent(t, "evt_succeeded", stripe.EventPaymentIntentSucceeded, now, map[string]any{
		"id": ch.ID, "object": "payment_intent", "amount": 9000, "currency": "try", "status": "succeeded",
		"description": ch.Description, "metadata": map[string]string{stripe.MetaKey: ch.Key}})

	refused := []struct {
		name     string
		body     []byte
		secret   string
		signedAt time.Time
	}{
		{"another secret", succeeded, "whsec_another", now},
		{"signed six minutes ago", succeeded, stripeWebhookSecret, now.Add(-6 * time.Minute)},
		{"body changed after signing", succeeded, "", now},
	}
	for _, r := range refused {
		b := r.body
		secret := r.secret
		if secret == "" { // sign the genuine body, send another
			secret, b = stripeWebhookSecret, []byte(strings.Replace(string(succeeded), "9000", "9001", 1))
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: succeeded, Secret: secret, Timestamp: now})
			req, _ := http.NewRequest("POST", e.URL+"/webhooks/stripe", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(stripe.SignatureHeader, signed.Header)
			resp, err := e.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 400 {
				t.Errorf("%s: %d, want 400", r.name, resp.StatusCode)
			}
			continue
		}
		if status, code := deliverStripe(t, e, b, secret, r.signedAt); status != 400 || code != "webhook_signature_invalid" {
			t.Errorf("%s: %d %s, want 400 webhook_signature_invalid", r.name, status, code)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM provider_events`) + count(t, e, `SELECT count(*) FROM payments`); n != 0 {
		t.Fatalf("refused deliveries stored or settled %d rows", n)
	}

	for i, want := range []string{"applied", "duplicate", "duplicate"} {
		if status, outcome := deliverStripe(t, e, succeeded, stripeWebhookSecret, time.Now()); status != 200 || outcome != want {
			t.Fatalf("delivery %d: %d %s, want 200 %s", i+1, status, outcome, want)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-stripe' AND state = 'completed' AND response_status = 201`); n != 1 {
		t.Fatal("the key was not completed with the paid answer")
	}
	r := postOrder(t, e, e.Secret, "k-stripe", body)
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" || decodeOrder(t, r).Status != "paid" {
		t.Fatalf("the retry: %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM payments`); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
	if n := count(t, e, `SELECT count(*) FROM provider_events WHERE provider = 'stripe' AND deliveries = 3`); n != 1 {
		t.Errorf("the event is not recorded once with its three deliveries")
	}

	refunded := stripeEvent(t, "evt_refunded", stripe.EventChargeRefunded, now.Add(time.Second), map[string]any{
		"id": "ch_stripe_1", "object": "charge", "amount": 9000, "amount_refunded": 3000, "currency": "try",
		"status": "succeeded", "payment_intent": ch.ID, "description": ch.Description,
		"metadata": map[string]string{stripe.MetaKey: ch.Key}})
	for i, want := range []string{"applied", "duplicate"} {
		if status, outcome := deliverStripe(t, e, refunded, stripeWebhookSecret, time.Now()); status != 200 || outcome != want {
			t.Fatalf("refund delivery %d: %d %s, want 200 %s", i+1, status, outcome, want)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM orders WHERE refunded_amount = 3000 AND status = 'partially_refunded'`); n != 1 {
		t.Errorf("the refund made at Stripe is not on the order")
	}
	// The older success, delivered again late, moves nothing back.
	if status, outcome := deliverStripe(t, e, stripeEvent(t, "evt_late", stripe.EventPaymentIntentSucceeded, now, map[string]any{
		"id": ch.ID, "object": "payment_intent", "amount": 9000, "currency": "try", "status": "succeeded",
		"description": ch.Description, "metadata": map[string]string{stripe.MetaKey: ch.Key}}), stripeWebhookSecret, time.Now()); status != 200 || outcome != "stale" {
		t.Errorf("a late older event: %d %s, want 200 stale", status, outcome)
	}
}

// A Stripe event the database refused as data is kept as a dead letter and acknowledged;
// once the cause is gone, the console's replay reads it as Stripe's (stripe.DecodeEvent) and
// applies it.
func TestStripeDeadLetterReplayed(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.StripeWebhookSecret = stripeWebhookSecret })
	if _, err := e.DB.Exec(`
		CREATE FUNCTION refuse_charge() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		    IF NEW.charge_id = 'pi_data' THEN RAISE EXCEPTION 'out of range' USING ERRCODE = '22003'; END IF;
		    RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_charge BEFORE INSERT ON provider_charges FOR EACH ROW EXECUTE FUNCTION refuse_charge();`); err != nil {
		t.Fatal(err)
	}
	body := stripeEvent(t, "evt_data", stripe.EventPaymentIntentSucceeded, time.Now(), map[string]any{
		"id": "pi_data", "object": "payment_intent", "amount": 9000, "currency": "try", "status": "succeeded",
		"metadata": map[string]string{stripe.MetaKey: "tekrar_pi_data"}})
	if status, outcome := deliverStripe(t, e, body, stripeWebhookSecret, time.Now()); status != 200 || outcome != "dead_letter" {
		t.Fatalf("refused as data: %d %s, want 200 dead_letter", status, outcome)
	}
	if _, err := e.DB.Exec(`DROP TRIGGER refuse_charge ON provider_charges`); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := e.DB.QueryRow(`SELECT id FROM provider_dead_letters WHERE provider = 'stripe' AND webhook_id = 'evt_data'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if outcome, err := e.App.Inbox.ReplayDeadLetter(t.Context(), id); err != nil || outcome != "applied" {
		t.Fatalf("replay: %s %v, want applied", outcome, err)
	}
	if n := count(t, e, `SELECT count(*) FROM provider_charges WHERE provider = 'stripe' AND charge_id = 'pi_data' AND status = 'succeeded'`); n != 1 {
		t.Errorf("the replayed event did not record its charge")
	}
}
