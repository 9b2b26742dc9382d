package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/completer"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func complete(t *testing.T, e *apptest.Env) completer.Result {
	t.Helper()
	res, err := e.App.Completer.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A customer who closed the app after a provider failure ends with no charge: the
// completer finds no charge at the provider and cancels the order; a late retry replays
// that answer.
func TestCompleterCancelsUnchargedOrder(t *testing.T) {
	e := apptest.New(t)
	problemOf(t, postOrder(t, e, e.Secret, "k-gone", orderBody(9000, "tok_fail")), 503, "payment_pending")
	// The client gets the first chance: within the grace nothing happens.
	if res := complete(t, e); res != (completer.Result{}) {
		t.Fatalf("completer acted within the grace: %+v", res)
	}
	e.Clock.Advance(2 * time.Minute)
	if res := complete(t, e); res.Canceled != 1 {
		t.Fatalf("completer: %+v", res)
	}
	if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'canceled'`); n != 1 {
		t.Fatal("order not canceled")
	}
	r := postOrder(t, e, e.Secret, "k-gone", orderBody(9000, "tok_fail"))
	p := problemOf(t, r, 409, "payment_abandoned")
	advice(t, p, false, true)
	var canceled string
	if err := e.DB.Get(&canceled, `SELECT public_id FROM orders WHERE status = 'canceled'`); err != nil || p["order_id"] != canceled {
		t.Fatalf("the abandoned answer names order %v, want the canceled one's public id %q (%v)", p["order_id"], canceled, err)
	}
	if r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the abandoned answer is not a replay")
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 0 {
		t.Fatalf("%d charges", n)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE state <> 'completed'`); n != 0 {
		t.Fatal("a key is left unfinished")
	}
	if got := e.App.Completer.Totals(); got.Canceled != 1 {
		t.Fatalf("totals %+v", got)
	}
}

// A charge that happened but whose answer was lost (tok_timeout) is settled as paid by the
// completer, with the body a retry would have got.
func TestCompleterSettlesChargedOrder(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.ProviderTimeout = 200 * time.Millisecond })
	problemOf(t, postOrder(t, e, e.Secret, "k-late", orderBody(9000, "tok_timeout")), 503, "payment_pending")
	e.Clock.Advance(2 * time.Minute)
	if res := complete(t, e); res.Completed != 1 {
		t.Fatalf("completer: %+v", res)
	}
	r := postOrder(t, e, e.Secret, "k-late", orderBody(9000, "tok_timeout"))
	o := decodeOrder(t, r)
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" || o.Status != "paid" {
		t.Fatalf("after completion: %d %s", r.Status, r.Body)
	}
	g := e.Do(t, "GET", "/v1/orders/"+o.ID, e.Secret, nil)
	if !bytes.Equal(bytes.TrimSpace(g.Body), r.Body) {
		t.Fatalf("completed body\n%s\ndiffers from the order\n%s", r.Body, g.Body)
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != 1 {
		t.Fatalf("%d charges", n)
	}
}

// When the provider cannot say what happened for longer than the horizon, the key goes to
// an operator: never expired, never guessed.
func TestUnresolvableKeyNeedsAttention(t *testing.T) {
	// The provider identifies cards, so the order is claimed (docs/fingerprints.md), and
	// drops the connection of every other call: it cannot say what happened to the charge.
	cards := psp.NewHandler(psp.NewSandbox(dbtest.New(t), psp.SandboxOptions{}), nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cards/fingerprint" {
			cards.ServeHTTP(w, r)
			return
		}
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	dead := srv.URL
	e := apptest.New(t, func(c *config.Server) {
		c.PSPURL = dead
		c.ProviderTimeout = 200 * time.Millisecond
		c.AttentionAfter = time.Hour
	})
	problemOf(t, postOrder(t, e, e.Secret, "k-dark", orderBody(9000, "tok_visa")), 503, "payment_pending")
	e.Clock.Advance(2 * time.Minute)
	if res := complete(t, e); res.Retry != 1 {
		t.Fatalf("before the horizon: %+v", res)
	}
	e.Clock.Advance(time.Hour)
	if res := complete(t, e); res.Attention != 1 {
		t.Fatalf("after the horizon: %+v", res)
	}
	var reason string
	if err := e.DB.Get(&reason, `SELECT attention_reason FROM idempotency_keys WHERE key = 'k-dark' AND state = 'needs_attention'`); err != nil || reason == "" {
		t.Fatalf("attention reason %q (%v)", reason, err)
	}
	advice(t, problemOf(t, postOrder(t, e, e.Secret, "k-dark", orderBody(9000, "tok_visa")), 503, "needs_attention"), true, false)
	// Past its TTL it is still there for the operator.
	e.Clock.Advance(48 * time.Hour)
	e.App.Sweeper.Pass(context.Background())
	e.Clock.Advance(2 * time.Minute)
	e.App.Sweeper.Pass(context.Background())
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'k-dark'`); n != 1 {
		t.Fatal("a key needing attention was swept")
	}
}

// A refund left unfinished is finished by the completer: a refund needs no card token.
func TestCompleterFinishesRefund(t *testing.T) {
	e := apptest.New(t)
	id := paidOrder(t, e, "k-order", 9000)
	if _, err := e.DB.Exec(`UPDATE orders SET refunded_amount = 1000 WHERE public_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	// A refund claimed by a process that died before calling the provider.
	_, err := e.DB.Exec(`
		WITH r AS (
		    INSERT INTO refunds (order_id, client_id, amount, currency, status, provider_key, created_at, updated_at)
		    SELECT o.id, $2, 1000, 'TRY', 'pending', 'unused', now(), now() FROM orders o WHERE o.public_id = $1
		    RETURNING id
		)
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point,
		                              lease_expires_at, refund_id, created_at, expires_at)
		SELECT $2, 'k-refund-dead', sha256('x'), 'POST', '/v1/orders/' || $1 || '/refunds', 'in_progress',
		       'refund_created', now() - interval '1 hour', r.id, now(), now() + interval '1 day' FROM r`, id, e.ClientID)
	if err != nil {
		t.Fatal(err)
	}
	if res := complete(t, e); res.Completed != 1 {
		t.Fatalf("completer: %+v", res)
	}
	if n := count(t, e, `SELECT count(*) FROM refunds WHERE status = 'succeeded'`); n != 1 {
		t.Fatal("refund not finished")
	}
	if n := count(t, e, `SELECT coalesce(sum(amount), 0) FROM psp_refunds`); n != 1000 {
		t.Fatalf("provider refunded %d", n)
	}
}

// The race fencing exists for: a worker stalls after claiming its key, its lease lapses, the
// completer finds no charge and gives up on it; then the stalled worker wakes and charges.
// "No charge yet" is not "no charge ever", so the completer never cancels on a look-up alone:
//
//   - at a provider that can fence, it cancels the charge key first; the stalled worker's
//     charge is refused, and the answer "nothing was charged" is true;
//   - at a provider that cannot, it cancels the order with a refund owed, in one statement;
//     the stalled worker's charge goes through, and the owed refund is made by the completer
//     (not by the stalled worker's memory), once.
func TestStalledWorkerIsFencedOrCompensated(t *testing.T) {
	for _, fence := range []bool{true, false} {
		name := map[bool]string{true: "provider fences the key", false: "provider cannot fence"}[fence]
		t.Run(name, func(t *testing.T) {
			stall, resume := make(chan struct{}), make(chan struct{})
			var once bool
			e := apptest.NewWith(t, func(point string) {
				if point == checkout.CrashAfterClaim && !once {
					once = true
					close(stall)
					<-resume
				}
			}, func(c *config.Server) { c.SandboxNoCancel = !fence })
			answer := make(chan apptest.Response, 1)
			go func() {
				r, _ := e.Send("POST", "/v1/orders", e.Secret, orderBody(9000, "tok_visa"), "Idempotency-Key", "k-stalled")
				answer <- r
			}()
			<-stall
			e.Clock.Advance(5 * time.Minute) // the stalled worker's 30 s lease and the grace are long gone
			res := complete(t, e)
			close(resume)
			if res.Canceled != 1 {
				t.Fatalf("completer: %+v", res)
			}
			r := <-answer
			problemOf(t, r, 409, "idempotency_key_in_use") // fenced: it may not answer for the key
			if n := count(t, e, `SELECT count(*) FROM payments`); n != 0 {
				t.Fatal("the fenced worker recorded its payment")
			}
			if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'canceled'`); n != 1 {
				t.Fatal("the order is not canceled")
			}
			replay := problemOf(t, postOrder(t, e, e.Secret, "k-stalled", orderBody(9000, "tok_visa")), 409, "payment_abandoned")
			says := strings.Contains(replay["detail"].(string), "nothing was charged")
			if fence {
				if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`); n != 0 {
					t.Fatalf("%d charges made under a canceled key", n)
				}
				if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status = 'canceled'`); n != 1 {
					t.Fatalf("%d canceled keys at the provider, want 1", n)
				}
				if n := count(t, e, `SELECT count(*) FROM compensations`); n != 0 {
					t.Fatalf("%d compensations for a fenced key", n)
				}
				if !says {
					t.Errorf("the stored answer of a fenced key should say nothing was charged: %v", replay["detail"])
				}
				return
			}
			if says {
				t.Errorf("without a fence the stored answer must not claim that nothing was charged: %v", replay["detail"])
			}
			if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`); n != 1 {
				t.Fatalf("%d charges", n)
			}
			// The woken worker recorded nothing but the debt; the refund is the completer's.
			if n := count(t, e, `SELECT count(*) FROM psp_refunds`); n != 0 {
				t.Fatalf("%d refunds before the completer ran", n)
			}
			if n := count(t, e, `SELECT count(*) FROM compensations WHERE state = 'watching' AND charge_id IS NOT NULL`); n != 1 {
				t.Fatal("the charge made after the cancel is not owed")
			}
			for range 3 { // the first pass refunds; the others find nothing to do
				e.Clock.Advance(time.Minute)
				complete(t, e)
			}
			if n := count(t, e, `SELECT coalesce(sum(amount), 0) FROM psp_refunds`); n != 9000 {
				t.Fatalf("refunded %d, want 9000 once", n)
			}
			if n := count(t, e, `SELECT count(*) FROM compensations c JOIN psp_refunds r ON r.id = c.refund_id
			                      WHERE c.state = 'refunded' AND c.amount = 9000`); n != 1 {
				t.Fatal("the refund is not recorded on its compensation")
			}
		})
	}
}
