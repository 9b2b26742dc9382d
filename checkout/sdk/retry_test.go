package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/sdk"
	"github.com/tekrar/tekrar/internal/config"
)

// TestLostAnswersChargeOnce: answers lost after tekrar executed the request, or held past
// the client's attempt timeout, are retried with the same key and body, and the card is
// charged once: the last attempt gets the first one's order, replayed.
func TestLostAnswersChargeOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps map[int]step
	}{
		{"one answer lost", map[int]step{1: lose}},
		{"two answers lost", map[int]step{1: lose, 2: lose}},
		{"answer past the timeout", map[int]step{1: late}},
		{"late, then lost", map[int]step{1: late, 2: lose}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy(5)
			p.AttemptTimeout = 2 * time.Second // the late answer is held past it
			r := newRig(t, p)
			for n, st := range tc.steps {
				r.tr.on(n, st)
			}
			key := sdk.NewKey()
			o, k, err := r.c.CreateOrder(context.Background(), key, order(9000, "tok_visa"))
			if err != nil {
				t.Fatal(err)
			}
			charged(t, r.e, 1, 1)
			sent := r.tr.attempts()
			if len(sent) != len(tc.steps)+1 || k.Attempts != len(sent) {
				t.Fatalf("%d attempts (client says %d), want %d", len(sent), k.Attempts, len(tc.steps)+1)
			}
			sameIntent(t, sent)
			if o.Status != "paid" || !k.Replayed || k.Key != key {
				t.Errorf("order %s, replayed %v, key %q: want the first attempt's paid order, replayed, under %q", o.Status, k.Replayed, k.Key, key)
			}
			backoffWithin(t, p, r.waits())
			if got, err := r.c.GetOrder(context.Background(), o.ID); err != nil || got.ID != o.ID || got.Status != "paid" {
				t.Fatalf("get order: %+v %v", got, err)
			}
		})
	}
}

// TestInProgressRetriedAfterRetryAfter: a retry that meets its first attempt still running
// gets 409 idempotency_key_in_use with Retry-After: 1; the client waits at least that long,
// then gets the first attempt's order. With Prefer: wait, tekrar holds the retry until the
// first finishes instead, and no 409 is seen.
func TestInProgressRetriedAfterRetryAfter(t *testing.T) {
	for _, wait := range []time.Duration{0, 8 * time.Second} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			p := policy(5)
			p.Wait = wait
			r := newRig(t, p, func(c *config.Server) { c.SandboxSlowDelay = 3 * time.Second })
			done := make(chan struct{})
			r.tr.on(1, r.tr.background(done))
			key := sdk.NewKey()
			r.onSleep = func(ctx context.Context, i int) error {
				switch i {
				case 0: // the first attempt's answer is lost: wait until tekrar has claimed its key
					waitFor(t, "the first attempt to claim its key", func() bool {
						return count(t, r.e, `SELECT count(*) FROM idempotency_keys WHERE key = $1 AND state = 'in_progress'`, key) == 1
					})
				case 1: // the retry was told to come back: come back once the first has finished
					<-done
				}
				return nil
			}
			o, k, err := r.c.CreateOrder(context.Background(), key, order(9000, "tok_slow"))
			if err != nil {
				t.Fatal(err)
			}
			sent := r.tr.attempts()
			sameIntent(t, sent)
			want := []int{0, http.StatusConflict, http.StatusCreated}
			if wait > 0 {
				want = []int{0, http.StatusCreated}
				if sent[1].prefer != "wait=8" {
					t.Errorf("Prefer %q, want wait=8", sent[1].prefer)
				}
			}
			if !slices.Equal(statuses(sent), want) {
				t.Fatalf("answers %v, want %v", statuses(sent), want)
			}
			waits := r.waits()
			if wait == 0 && waits[1] < time.Second {
				t.Errorf("waited %v after the 409, whose Retry-After is 1 s", waits[1])
			}
			if o.Status != "paid" || !k.Replayed {
				t.Errorf("order %s, replayed %v", o.Status, k.Replayed)
			}
			charged(t, r.e, 1, 1)
		})
	}
}

// TestRetryAfterHonoured: a 503 store_unavailable (tekrar's database down) with
// Retry-After: 2, then one with 3, are waited out at least that long, although the
// backoff alone would wait milliseconds; the third attempt runs the order once.
func TestRetryAfterHonoured(t *testing.T) {
	r := newRig(t, policy(5))
	r.tr.on(1, problemAnswer(503, "store_unavailable", true, false, 2))
	r.tr.on(2, problemAnswer(503, "store_unavailable", true, false, 3))
	o, k, err := r.c.CreateOrder(context.Background(), "", order(9000, "tok_visa"))
	if err != nil {
		t.Fatal(err)
	}
	waits := r.waits()
	if len(waits) != 2 || waits[0] < 2*time.Second || waits[1] < 3*time.Second {
		t.Fatalf("waits %v, want at least 2s then 3s", waits)
	}
	if k.Attempts != 3 || k.Replayed || o.Status != "paid" {
		t.Fatalf("attempts %d replayed %v status %s", k.Attempts, k.Replayed, o.Status)
	}
	sameIntent(t, r.tr.attempts())
	charged(t, r.e, 1, 1)
}

// TestProviderTimeoutRetried: the provider charges but answers too late (tok_timeout): tekrar
// answers 503 payment_pending (retryable, not safe with a new key), and the client's retry
// with the same key finds the charge instead of charging again.
func TestProviderTimeoutRetried(t *testing.T) {
	r := newRig(t, policy(5), func(c *config.Server) { c.ProviderTimeout = 200 * time.Millisecond })
	o, k, err := r.c.CreateOrder(context.Background(), "", order(9000, "tok_timeout"))
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(r.tr.attempts()); !slices.Equal(got, []int{503, 201}) {
		t.Fatalf("answers %v, want 503 then 201", got)
	}
	if waits := r.waits(); waits[0] < time.Second {
		t.Errorf("waited %v after payment_pending, whose Retry-After is 1 s", waits[0])
	}
	if o.Status != "paid" || k.Attempts != 2 {
		t.Fatalf("order %s after %d attempts", o.Status, k.Attempts)
	}
	sameIntent(t, r.tr.attempts())
	charged(t, r.e, 1, 1)
}

// TestAttemptsAreBounded: a provider that keeps failing (tok_fail, 503 payment_pending every
// time), or answers that keep getting lost, stop after MaxAttempts, with the key to retry
// later and nothing charged twice.
func TestAttemptsAreBounded(t *testing.T) {
	t.Run("payment_pending", func(t *testing.T) {
		r := newRig(t, policy(4))
		_, _, err := r.c.CreateOrder(context.Background(), "k-fail", order(9000, "tok_fail"))
		var p *sdk.Error
		if !errors.As(err, &p) || !errors.Is(err, sdk.ErrPaymentPending) {
			t.Fatalf("error %v, want payment_pending", err)
		}
		if !p.Retryable || p.SafeNewKey || p.Attempts != 4 || p.Key != "k-fail" || p.RetryAfter != time.Second {
			t.Fatalf("problem %+v", p)
		}
		if n := len(r.tr.attempts()); n != 4 {
			t.Fatalf("%d attempts, want 4", n)
		}
		sameIntent(t, r.tr.attempts())
		charged(t, r.e, 0, 1)
	})
	t.Run("lost answers", func(t *testing.T) {
		r := newRig(t, policy(3))
		for n := 1; n <= 5; n++ {
			r.tr.on(n, lose)
		}
		_, _, err := r.c.CreateOrder(context.Background(), "", order(9000, "tok_visa"))
		var u *sdk.UnknownOutcome
		if !errors.As(err, &u) || !errors.Is(err, errLost) || u.Attempts != 3 || u.Key == "" {
			t.Fatalf("error %v, want an unknown outcome after 3 attempts", err)
		}
		sent := r.tr.attempts()
		if len(sent) != 3 || sent[0].key != u.Key {
			t.Fatalf("%d attempts under %q, want 3 under %q", len(sent), sent[0].key, u.Key)
		}
		sameIntent(t, sent)
		backoffWithin(t, policy(3), r.waits())
		charged(t, r.e, 1, 1)
	})
}

// TestDecisionsFollowTheProblem: whether to retry is the problem's "retryable", whatever
// the status; an answer that is not tekrar's is a lost answer only when it is a gateway
// error. Each case answers the first attempt itself; the second is forwarded.
func TestDecisionsFollowTheProblem(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    step
		retried  bool
		wantCode sdk.Code
	}{
		{"503 not retryable", problemAnswer(503, "webhook_secrets_key_missing", false, true, 0), false, sdk.CodeWebhookSecretsKeyMissing},
		{"500 retryable", problemAnswer(500, "internal_error", true, false, 0), true, ""},
		{"409 retryable", problemAnswer(409, "idempotency_key_in_use", true, false, 0), true, ""},
		{"409 not retryable", problemAnswer(409, "order_not_refundable", false, true, 0), false, sdk.CodeOrderNotRefundable},
		{"429 retryable, a code this client does not know", problemAnswer(429, "slow_down", true, false, 0), true, ""},
		{"402 without advice", answer(402, "application/problem+json", `{"code":"payment_declined","status":402}`, 0), false, sdk.CodePaymentDeclined},
		{"502 from a proxy", answer(502, "text/html", "<html>Bad Gateway</html>", 0), true, ""},
		{"404 from a proxy", answer(404, "text/plain", "no route", 0), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, policy(5))
			r.tr.on(1, tc.first)
			_, k, err := r.c.CreateOrder(context.Background(), "", order(9000, "tok_visa"))
			n := len(r.tr.attempts())
			if tc.retried {
				if err != nil || n != 2 || k.Attempts != 2 {
					t.Fatalf("%d attempts, error %v; want a retry that succeeds", n, err)
				}
				charged(t, r.e, 1, 1)
				return
			}
			if err == nil || n != 1 {
				t.Fatalf("%d attempts, error %v; want one attempt and its error", n, err)
			}
			var p *sdk.Error
			if tc.wantCode != "" && (!errors.As(err, &p) || p.Code != tc.wantCode || p.Attempts != 1) {
				t.Fatalf("error %v, want %s", err, tc.wantCode)
			}
			charged(t, r.e, 0, 0)
		})
	}
}

// TestRefusalsAreNotRetried: problems that say not retryable end the call after one
// attempt, as typed errors: a validation failure (nothing stored: the fixed request may
// keep the key), a key reused for another body (nothing executed, and no new key: the first
// may have charged), a declined card (final; a new key is safe).
func TestRefusalsAreNotRetried(t *testing.T) {
	r := newRig(t, policy(5))
	ctx := context.Background()

	bad := order(9000, "tok_visa")
	bad.Amount = 9001
	_, _, err := r.c.CreateOrder(ctx, "k-1", bad)
	var p *sdk.Error
	if !errors.Is(err, sdk.ErrValidationFailed) || !errors.As(err, &p) || p.Attempts != 1 || len(p.Fields) == 0 || p.Retryable || !p.SafeNewKey {
		t.Fatalf("validation: %v (%+v)", err, p)
	}
	charged(t, r.e, 0, 0)

	if _, _, err := r.c.CreateOrder(ctx, "k-1", order(9000, "tok_visa")); err != nil {
		t.Fatalf("the fixed request under the same key: %v", err)
	}
	// Another body under the key: not executed, and not known to be a new purchase.
	other := order(4500, "tok_visa")
	_, _, err = r.c.CreateOrder(ctx, "k-1", other)
	if !errors.Is(err, sdk.ErrIdempotencyKeyReused) || !errors.As(err, &p) || p.Attempts != 1 || p.SafeNewKey || p.Key != "k-1" {
		t.Fatalf("reuse: %v (%+v)", err, p)
	}
	charged(t, r.e, 1, 1)

	for i := 0; i < 2; i++ {
		_, _, err = r.c.CreateOrder(ctx, "k-2", order(9000, "tok_declined"))
		if !errors.Is(err, sdk.ErrPaymentDeclined) || !errors.As(err, &p) || p.Attempts != 1 || !p.SafeNewKey || p.OrderID == "" {
			t.Fatalf("declined: %v (%+v)", err, p)
		}
	}
	if n := len(r.tr.attempts()); n != 5 {
		t.Fatalf("%d requests for 5 calls", n)
	}
	charged(t, r.e, 2, 2) // the paid order and the declined one, each tried once at the provider
}

// TestCancelStopsRetrying: a context canceled while the client waits between attempts, or
// during an attempt, ends the call at once with the context's error.
func TestCancelStopsRetrying(t *testing.T) {
	t.Run("while waiting", func(t *testing.T) {
		r := newRig(t, policy(5))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.onSleep = func(context.Context, int) error { cancel(); return nil }
		_, _, err := r.c.CreateOrder(ctx, "", order(9000, "tok_fail"))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, sdk.ErrPaymentPending) {
			t.Fatalf("error %v, want canceled after payment_pending", err)
		}
		if n := len(r.tr.attempts()); n != 1 {
			t.Fatalf("%d attempts after the cancel", n)
		}
	})
	t.Run("during an attempt", func(t *testing.T) {
		r := newRig(t, policy(5))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.tr.on(1, func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
			cancel()
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		_, _, err := r.c.CreateOrder(ctx, "", order(9000, "tok_visa"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want canceled", err)
		}
		if n := len(r.tr.attempts()); n != 1 || len(r.waits()) != 0 {
			t.Fatalf("%d attempts, %d waits after the cancel", n, len(r.waits()))
		}
	})
	t.Run("deadline before Retry-After", func(t *testing.T) {
		r := newRig(t, policy(5))
		r.tr.on(1, problemAnswer(503, "store_unavailable", true, false, 60))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _, err := r.c.CreateOrder(ctx, "", order(9000, "tok_visa"))
		if !errors.Is(err, sdk.ErrStoreUnavailable) || len(r.tr.attempts()) != 1 || len(r.waits()) != 0 {
			t.Fatalf("error %v after %d attempts: want store_unavailable, given up at once", err, len(r.tr.attempts()))
		}
	})
}

// waitFor polls cond until it holds, failing after a generous deadline. It waits for an
// asynchronous effect; it times nothing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
