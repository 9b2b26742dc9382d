package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// maxAnswer bounds the body read from one answer; tekrar's are far smaller.
const maxAnswer = 8 << 20

// request is one call: the same method, path, body and key on every attempt.
type request struct {
	method, path string
	body         []byte // encoded once, so that every attempt sends the same bytes
	key          string // "" for a call without an Idempotency-Key
}

// answer is the response of the attempt that ended the call.
type answer struct {
	status   int
	header   http.Header
	body     []byte
	attempts int
}

// UnknownOutcome is the error of a call whose every attempt lost its answer (the connection
// failed, the attempt timed out, or something in front of tekrar answered instead of it).
// The request may have been executed: retry it later with the same Key and body, never with
// a new key. GET /v1/idempotency-keys/{key} says what became of it.
type UnknownOutcome struct {
	Key      string
	Attempts int
	Err      error // what the last attempt met
}

func (e *UnknownOutcome) Error() string {
	return fmt.Sprintf("tekrar: outcome unknown after %d attempts (retry with the same key): %v", e.Attempts, e.Err)
}

func (e *UnknownOutcome) Unwrap() error { return e.Err }

// do sends r until it gets an answer that is not worth retrying, the policy's attempts are
// spent, or ctx is done. It returns a 2xx answer, or an error: *Error for a problem,
// *UnknownOutcome when no answer came back, the context's error (joined with the last
// outcome) when ctx ended the call.
//
// Every request here may be sent again after a lost answer: keyed POSTs (tekrar replays or
// finishes the first attempt), GETs and whole-resource PUTs. A problem is retried only when
// it says retryable.
func (c *Client) do(ctx context.Context, r request) (answer, error) {
	for attempt := 1; ; attempt++ {
		ans, err := c.attempt(ctx, r)
		if ctx.Err() != nil {
			return answer{}, fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
		}
		var last error
		var retryAfter time.Duration
		switch {
		case err != nil:
			last = &UnknownOutcome{Key: r.key, Attempts: attempt, Err: err}
		case ans.status >= 200 && ans.status < 300:
			ans.attempts = attempt
			return ans, nil
		default:
			p := parseProblem(ans)
			if p == nil {
				// Not tekrar's answer: a proxy or load balancer in front answered. Whether the
				// request reached tekrar is unknown; a gateway error is a lost answer.
				err := fmt.Errorf("%d answer that is not a tekrar problem: %.200q", ans.status, ans.body)
				if ans.status < 500 {
					return answer{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
				}
				last = &UnknownOutcome{Key: r.key, Attempts: attempt, Err: err}
				break
			}
			p.Key, p.Attempts = r.key, attempt
			if !p.Retryable {
				return answer{}, p
			}
			last, retryAfter = p, p.RetryAfter
		}
		if attempt >= c.policy.MaxAttempts {
			return answer{}, last
		}
		d := c.delay(attempt, retryAfter)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			return answer{}, fmt.Errorf("%s %s: the next attempt (in %v) would be past the context's deadline: %w",
				r.method, r.path, d, last)
		}
		if err := c.sleep(ctx, d); err != nil {
			return answer{}, fmt.Errorf("%s %s: %w; last attempt: %w", r.method, r.path, err, last)
		}
	}
}

// delay is the wait after the given attempt: exponential backoff with jitter (a random
// point of the upper half of BaseDelay·2^(attempt-1), capped by MaxDelay), and never less
// than the answer's Retry-After.
func (c *Client) delay(attempt int, retryAfter time.Duration) time.Duration {
	p := c.policy
	d := p.BaseDelay
	for i := 1; i < attempt && d < time.Hour && (p.MaxDelay <= 0 || d < p.MaxDelay); i++ {
		d *= 2
	}
	if p.MaxDelay > 0 {
		d = min(d, p.MaxDelay)
	}
	if d > 1 {
		d = d/2 + rand.N(d/2+1)
	}
	return max(d, retryAfter)
}

// attempt sends r once. An error means no answer arrived.
func (c *Client) attempt(ctx context.Context, r request) (answer, error) {
	if c.policy.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.policy.AttemptTimeout)
		defer cancel()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, body)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "tekrar-go")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
		if w := int(c.policy.Wait / time.Second); w > 0 {
			req.Header.Set("Prefer", "wait="+strconv.Itoa(w))
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// parseProblem reads a problem+json answer; nil when the answer is not one.
func parseProblem(a answer) *Error {
	mt, _, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
	if mt != "application/problem+json" {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(a.body, &members) != nil {
		return nil
	}
	var p struct {
		Code       Code         `json:"code"`
		Title      string       `json:"title"`
		Detail     string       `json:"detail"`
		Retryable  bool         `json:"retryable"`
		SafeNewKey bool         `json:"safe_new_key"`
		OrderID    string       `json:"order_id"`
		Errors     []FieldError `json:"errors"`
	}
	if json.Unmarshal(a.body, &p) != nil || p.Code == "" {
		return nil
	}
	return &Error{Status: a.status, Code: p.Code, Title: p.Title, Detail: p.Detail,
		Retryable: p.Retryable, SafeNewKey: p.SafeNewKey, RetryAfter: retryAfter(a.header.Get("Retry-After")),
		OrderID: p.OrderID, Fields: p.Errors, Extensions: members}
}

// retryAfter reads Retry-After: seconds or an HTTP date; 0 when absent or unreadable.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// keyed reads the idempotency headers of a keyed answer.
func keyed(r request, a answer) Keyed {
	k := Keyed{Key: r.key, Replayed: a.header.Get("Idempotent-Replayed") == "true", Attempts: a.attempts}
	if t, err := time.Parse(time.RFC3339, a.header.Get("Idempotency-Expires")); err == nil {
		k.Expires = t
	}
	return k
}

// decode reads a 2xx answer's JSON body into v.
func decode(r request, a answer, v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("%s %s: decoding the %d answer: %w", r.method, r.path, a.status, err)
	}
	return nil
}

var errEmptyID = errors.New("empty id")
