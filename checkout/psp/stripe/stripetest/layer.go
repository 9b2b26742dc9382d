package stripetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Fault is what Layer does to one request instead of passing its answer on.
type Fault int

const (
	// LoseAnswer sends the request on and keeps its answer under its key, then fails as a
	// connection reset would: the caller never hears of a request that was served.
	LoseAnswer Fault = iota + 1
	// Answer500 sends the request on (the charge may be made) and answers, and keeps under
	// the key, a 500 api_error instead: what Stripe saves when it fails mid-request.
	Answer500
	// Answer429 answers 429 rate_limit with Stripe-Should-Retry: true without sending the
	// request on, and keeps nothing: Stripe's rate limiter answers before any key is read.
	Answer429
)

// ErrAnswerLost is the transport error of a LoseAnswer.
var ErrAnswerLost = errors.New("stripetest: connection reset after the request was served")

// DeclinedTokens are the test cards Layer's TestCards answers with a decline.
var DeclinedTokens = []string{"pm_card_chargeDeclined", "tok_chargeDeclined", "pm_card_visa_chargeDeclined"}

// Layer is an http.RoundTripper in front of stripe-mock that does what a stateless mock
// cannot: it keeps the first answer of every Idempotency-Key, errors included, and replays
// it for the same request (and refuses another request under the key with an
// idempotency_error), as Stripe does; it loses or replaces the answers of requests named in
// advance (Inject); and it counts what reached the mock (Served).
type Layer struct {
	// Next is the transport to the mock; nil: http.DefaultTransport.
	Next http.RoundTripper
	// TestCards answers as Stripe does for its test cards where the fixtures cannot: a
	// confirmed PaymentIntent succeeded (or declined, for DeclinedTokens) with the request's
	// metadata, a canceled one canceled, the searched and listed ones with the metadata
	// searched for and an outcome.
	TestCards bool

	mu     sync.Mutex
	saved  map[string]answer
	faults []fault
	served map[string]int
}

type fault struct {
	method, path string
	f            Fault
}

type answer struct {
	request string // method, path and body: what a repeat of the key must send
	status  int
	header  http.Header
	body    []byte
}

// Inject makes the next request of method to path meet f.
func (l *Layer) Inject(method, path string, f Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, fault{method, path, f})
}

// Served is how many requests of method to path reached the mock.
func (l *Layer) Served(method, path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served[method+" "+path]
}

// Client is an HTTP client through the layer.
func (l *Layer) Client() *http.Client { return &http.Client{Transport: l} }

// Handler serves the layer in front of the mock at base, for a process (tekrar serve) that
// reaches Stripe by URL.
func (l *Layer) Handler(base string) http.Handler {
	target, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host, out.Host = target.Scheme, target.Host, target.Host
		resp, err := l.RoundTrip(out)
		if err != nil {
			// A lost answer: the connection ends without one.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}

// RoundTrip implements http.RoundTripper.
func (l *Layer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	key := req.Header.Get("Idempotency-Key")
	if req.Method != http.MethodPost {
		key = ""
	}
	request := req.Method + " " + req.URL.Path + "?" + string(body)
	l.mu.Lock()
	if a, ok := l.saved[key]; ok && key != "" {
		l.mu.Unlock()
		if a.request != request {
			return respond(req, http.StatusBadRequest, nil, stripeError("idempotency_error", "",
				"Keys for idempotent requests can only be used with the same parameters they were first used with.")), nil
		}
		h := a.header.Clone()
		h.Set("Idempotent-Replayed", "true")
		return respond(req, a.status, h, a.body), nil
	}
	f := l.take(req.Method, req.URL.Path)
	l.mu.Unlock()
	if f == Answer429 {
		h := http.Header{"Stripe-Should-Retry": {"true"}}
		return respond(req, http.StatusTooManyRequests, h, stripeError("invalid_request_error", "rate_limit", "Too many requests.")), nil
	}
	next := l.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err // the mock never answered: nothing is kept
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	a := answer{request: request, status: resp.StatusCode, header: resp.Header.Clone(), body: got}
	if l.TestCards && a.status == http.StatusOK {
		a.status, a.body = play(req, body, a.body)
	}
	if f == Answer500 {
		a.status, a.body = http.StatusInternalServerError, stripeError("api_error", "", "An unknown error occurred.")
		a.header.Set("Stripe-Should-Retry", "false")
	}
	l.mu.Lock()
	if l.served == nil {
		l.served = map[string]int{}
	}
	l.served[req.Method+" "+req.URL.Path]++
	if key != "" {
		if l.saved == nil {
			l.saved = map[string]answer{}
		}
		l.saved[key] = a
	}
	l.mu.Unlock()
	if f == LoseAnswer {
		return nil, ErrAnswerLost
	}
	return respond(req, a.status, a.header, a.body), nil
}

// take removes and returns the first fault injected for method and path; l.mu is held.
func (l *Layer) take(method, path string) Fault {
	for i, f := range l.faults {
		if f.method == method && f.path == path {
			l.faults = append(l.faults[:i], l.faults[i+1:]...)
			return f.f
		}
	}
	return 0
}

func respond(req *http.Request, status int, h http.Header, body []byte) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	h = h.Clone()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Request: req,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
}

func stripeError(typ, code, msg string) []byte {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

var (
	cancelPath  = regexp.MustCompile(`^/v1/payment_intents/([^/]+)/cancel$`)
	searchQuery = regexp.MustCompile(`^metadata\['([^']+)'\]:'((?:[^'\\]|\\.)*)'$`)
)

// play makes a fixture answer what Stripe answers for the test cards.
func play(req *http.Request, reqBody, body []byte) (int, []byte) {
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return http.StatusOK, body
	}
	form, _ := url.ParseQuery(string(reqBody))
	path := req.URL.Path
	switch {
	case req.Method == http.MethodPost && path == "/v1/payment_intents" && form.Get("confirm") == "true":
		meta := map[string]any{}
		for k, v := range form {
			if strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]") {
				meta[k[len("metadata["):len(k)-1]] = v[0]
			}
		}
		obj["metadata"] = meta
		for _, tok := range DeclinedTokens {
			if form.Get("payment_method") == tok {
				obj["status"], obj["latest_charge"] = "requires_payment_method", nil
				obj["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "generic_decline"}
				e := map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "generic_decline",
					"message": "Your card was declined.", "payment_intent": obj}
				b, _ := json.Marshal(map[string]any{"error": e})
				return http.StatusPaymentRequired, b
			}
		}
		succeed(obj)
		if ch, ok := obj["latest_charge"].(map[string]any); ok {
			ch["metadata"] = meta
		}
	case req.Method == http.MethodPost && cancelPath.MatchString(path):
		obj["id"] = cancelPath.FindStringSubmatch(path)[1]
		obj["status"], obj["last_payment_error"], obj["latest_charge"] = "canceled", nil, nil
	case req.Method == http.MethodGet && path == "/v1/payment_intents/search":
		m := searchQuery.FindStringSubmatch(req.URL.Query().Get("query"))
		for _, it := range items(obj) {
			it["status"], it["last_payment_error"] = "requires_payment_method", nil
			if m != nil {
				it["metadata"] = map[string]any{m[1]: strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[2])}
			}
		}
	case req.Method == http.MethodGet && path == "/v1/payment_intents":
		for _, it := range items(obj) {
			succeed(it)
		}
	default:
		return http.StatusOK, body
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return http.StatusOK, body
	}
	return http.StatusOK, b
}

// succeed makes a PaymentIntent (and its expanded latest charge) one that succeeded.
func succeed(pi map[string]any) {
	pi["status"], pi["last_payment_error"] = "succeeded", nil
	if ch, ok := pi["latest_charge"].(map[string]any); ok {
		ch["status"], ch["paid"], ch["amount"], ch["currency"], ch["payment_intent"] = "succeeded", true, pi["amount"], pi["currency"], pi["id"]
		ch["amount_refunded"], ch["refunded"] = 0, false
	}
}

func items(list map[string]any) []map[string]any {
	data, _ := list["data"].([]any)
	var out []map[string]any
	for _, d := range data {
		if m, ok := d.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
