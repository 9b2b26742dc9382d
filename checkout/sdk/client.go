package sdk

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// Client calls one tekrar as one API client (one secret). It is safe for concurrent use.
type Client struct {
	base   string
	secret string
	http   *http.Client
	policy Policy
	sleep  func(ctx context.Context, d time.Duration) error
}

// Policy bounds the retries of one call.
type Policy struct {
	// MaxAttempts is how many requests one call sends at most, the first included.
	MaxAttempts int
	// BaseDelay is the wait before the second attempt; each further one doubles it, up to
	// MaxDelay (0: up to an hour). The wait is drawn at random from its upper half (jitter),
	// so that clients that failed together do not retry together.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// AttemptTimeout bounds one attempt. An attempt that times out is a lost answer: the
	// request may have been executed, so it is retried with the same key. Keep it above Wait
	// and above tekrar's provider timeout. 0: no bound but the context's.
	AttemptTimeout time.Duration
	// Wait is sent on keyed requests as Prefer: wait=N (whole seconds): a retry that meets
	// its first attempt still running waits that long for its answer (tekrar caps it with
	// TEKRAR_MAX_WAIT). 0 sends no Prefer.
	Wait time.Duration
}

// DefaultPolicy is the policy of New: 5 attempts, waits of about 0.2, 0.4, 0.8 and 1.6
// seconds (or each answer's Retry-After, when longer), 30 seconds per attempt, Prefer: wait=5.
func DefaultPolicy() Policy {
	return Policy{MaxAttempts: 5, BaseDelay: 200 * time.Millisecond, MaxDelay: 10 * time.Second,
		AttemptTimeout: 30 * time.Second, Wait: 5 * time.Second}
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends the requests through h (its Transport, proxies, TLS settings);
// http.DefaultClient by default. Its Timeout, if any, bounds each attempt.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithPolicy replaces DefaultPolicy. A MaxAttempts below 1 is 1.
func WithPolicy(p Policy) Option {
	return func(c *Client) {
		p.MaxAttempts = max(p.MaxAttempts, 1)
		c.policy = p
	}
}

// WithSleep replaces how the Client waits between attempts; sleep must return early, with
// ctx.Err(), when ctx is done. Tests use it to see the delays the policy chose without
// waiting for them.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// New returns a Client of the tekrar at baseURL (such as "https://pay.example.com") that
// authenticates with secret (`tekrar clients create` prints one).
func New(baseURL, secret string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), secret: secret, http: http.DefaultClient,
		policy: DefaultPolicy(), sleep: sleepContext}
	for _, o := range opts {
		o(c)
	}
	return c
}

// sleepContext waits d, or until ctx is done.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
