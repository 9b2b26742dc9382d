package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/sdk"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// rig is a real tekrar and a client of it whose requests pass through a scripted transport,
// with the delays the client chose between attempts (recorded, not waited for).
type rig struct {
	e  *apptest.Env
	tr *script
	c  *sdk.Client

	mu     sync.Mutex
	delays []time.Duration
	// onSleep, when set, runs in place of each wait (after it is recorded), with the wait's
	// index: what a test does while the client would be sleeping.
	onSleep func(ctx context.Context, i int) error
}

// newRig starts tekrar (change adjusts its configuration) and a client with policy p.
func newRig(t *testing.T, p sdk.Policy, change ...func(*config.Server)) *rig {
	t.Helper()
	r := &rig{e: apptest.New(t, change...)}
	r.tr = &script{t: t, steps: map[int]step{}}
	t.Cleanup(r.tr.wg.Wait) // before apptest's cleanups close the server
	r.c = sdk.New(r.e.URL, r.e.Secret, sdk.WithHTTPClient(&http.Client{Transport: r.tr}),
		sdk.WithPolicy(p), sdk.WithSleep(r.sleep))
	return r
}

func (r *rig) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.delays = append(r.delays, d)
	i, on := len(r.delays)-1, r.onSleep
	r.mu.Unlock()
	if on != nil {
		if err := on(ctx, i); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (r *rig) waits() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.delays...)
}

// policy is a test policy: small backoff, so that a delay of a second or more can only
// come from a Retry-After.
func policy(attempts int) sdk.Policy {
	return sdk.Policy{MaxAttempts: attempts, BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond,
		AttemptTimeout: 10 * time.Second}
}

// step is what the transport does with one attempt instead of forwarding it.
type step func(req *http.Request, next http.RoundTripper) (*http.Response, error)

// script is a RoundTripper that forwards each attempt to tekrar, or does what the test set
// for that attempt's number (1-based), and records what each attempt sent.
type script struct {
	t     *testing.T
	mu    sync.Mutex
	steps map[int]step
	sent  []sent
	wg    sync.WaitGroup // requests forwarded in the background
}

type sent struct {
	key, prefer string
	body        []byte
	status      int // of the answer the client got; 0 for none
}

func (s *script) on(attempt int, st step) { s.mu.Lock(); s.steps[attempt] = st; s.mu.Unlock() }

func (s *script) attempts() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sent(nil), s.sent...)
}

func (s *script) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.mu.Lock()
	s.sent = append(s.sent, sent{key: req.Header.Get("Idempotency-Key"), prefer: req.Header.Get("Prefer"), body: body})
	n := len(s.sent)
	st := s.steps[n]
	s.mu.Unlock()
	if st == nil {
		st = forward
	}
	resp, err := st(req, http.DefaultTransport)
	if resp != nil {
		s.mu.Lock()
		s.sent[n-1].status = resp.StatusCode
		s.mu.Unlock()
	}
	return resp, err
}

var errLost = errors.New("connection reset (the test dropped the answer)")

func forward(req *http.Request, next http.RoundTripper) (*http.Response, error) {
	return next.RoundTrip(req)
}

// lose forwards the request, lets tekrar answer it in full, and drops the answer.
func lose(req *http.Request, next http.RoundTripper) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errLost
}

// late forwards the request and holds its answer until the client's attempt timeout has
// given up on it: an answer delayed past the timeout.
func late(req *http.Request, next http.RoundTripper) (*http.Response, error) {
	resp, err := next.RoundTrip(req.WithContext(context.WithoutCancel(req.Context())))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// background forwards the request without waiting for its answer, and loses it: the
// attempt is still running in tekrar when the client retries. done is closed once tekrar
// has answered.
func (s *script) background(done chan<- struct{}) step {
	return func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		req = req.Clone(context.WithoutCancel(req.Context()))
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(done)
			if resp, err := next.RoundTrip(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		return nil, errLost
	}
}

// answer answers the attempt itself, without forwarding it, with a problem (or, when
// contentType is not problem+json, with body as it is).
func answer(status int, contentType, body string, retryAfter int) step {
	return func(req *http.Request, _ http.RoundTripper) (*http.Response, error) {
		h := http.Header{"Content-Type": {contentType}}
		if retryAfter > 0 {
			h.Set("Retry-After", strconv.Itoa(retryAfter))
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewBufferString(body)),
			Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
	}
}

// problemAnswer is a problem of code with the given advice.
func problemAnswer(status int, code string, retryable, safeNewKey bool, retryAfter int) step {
	return answer(status, "application/problem+json", fmt.Sprintf(
		`{"type":"urn:tekrar:problem:%s","title":"injected","status":%d,"code":%q,"retryable":%t,"safe_new_key":%t}`,
		code, status, code, retryable, safeNewKey), retryAfter)
}

// order is a valid order of amount paid with token.
func order(amount int64, token string) sdk.OrderInput {
	return sdk.OrderInput{Currency: "TRY", Amount: amount,
		Items:    []sdk.Item{{SKU: "LATTE", Name: "Latte", Quantity: 1, UnitAmount: amount}},
		Payment:  sdk.Payment{CardToken: token},
		Customer: &sdk.Customer{ID: "cus_42", Email: "ayse@example.com"}}
}

// count runs a COUNT query on tekrar's database (the provider's ledger is there too).
func count(t *testing.T, e *apptest.Env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.DB.GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// charged checks how many charges the sandbox provider's ledger holds and how many orders
// tekrar stored.
func charged(t *testing.T, e *apptest.Env, charges, orders int) {
	t.Helper()
	if n := count(t, e, `SELECT count(*) FROM psp_charges WHERE status <> 'canceled'`); n != charges {
		t.Errorf("%d charges in the provider's ledger, want %d", n, charges)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != orders {
		t.Errorf("%d orders, want %d", n, orders)
	}
}

// sameIntent checks that every attempt sent the same key and the same body bytes.
func sameIntent(t *testing.T, sent []sent) {
	t.Helper()
	for i, s := range sent {
		if s.key == "" || s.key != sent[0].key || !bytes.Equal(s.body, sent[0].body) {
			t.Fatalf("attempt %d sent key %q body %s; attempt 1 sent %q %s", i+1, s.key, s.body, sent[0].key, sent[0].body)
		}
	}
}

// backoffWithin checks that wait i (0-based) is the policy's backoff with jitter: the upper
// half of BaseDelay·2^i, capped by MaxDelay.
func backoffWithin(t *testing.T, p sdk.Policy, waits []time.Duration) {
	t.Helper()
	for i, d := range waits {
		hi := min(p.BaseDelay<<i, p.MaxDelay)
		if d < hi/2 || d > hi {
			t.Errorf("wait %d is %v, want between %v and %v", i, d, hi/2, hi)
		}
	}
}

func statuses(sent []sent) []int {
	out := make([]int, len(sent))
	for i, s := range sent {
		out[i] = s.status
	}
	return out
}
