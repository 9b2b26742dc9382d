package psp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/tekrar/tekrar/internal/problem"
)

// The HTTP API of a provider, served by NewHandler and spoken by Client:
//
//	POST /charges        body: ChargeRequest as JSON  -> 200 Charge (succeeded or declined)
//	POST /refunds        body: RefundRequest as JSON  -> 200 Refund
//	GET  /charges/{key}                               -> 200 Charge
//	GET  /refunds/{key}                               -> 200 Refund
//	POST /charges/{key}/cancel                        -> 200 Charge (canceled, or the charge made first)
//	GET  /charges?since=&until=&after=&limit=         -> 200 ChargePage (RFC 3339 times; after
//	                                                     and limit optional)
//	GET  /charges?reference=                          -> 200 ChargePage (every charge whose
//	                                                     description is reference; ReferenceFinder)
//	POST /cards/fingerprint  {"card_token":"..."}     -> 200 {"fingerprint":"fp_..."}
//	GET  /capability                                  -> 200 {"provider":"sandbox","key_window":"..."}
//	                                                     (its row of the capability table; Promiser)
//
// The sandbox adds its dashboard, for tests and demos (the Dashboard interface: the Sandbox
// does it, Client asks for it):
//
//	POST /dashboard/charges/{id}/refunds   {"amount":N,"reason":"..."}  -> 200 Refund
//	POST /dashboard/charges/{id}/disputes  {"amount":N,"reason":"..."}  -> 200 Dispute
//	POST /dashboard/disputes/{id}/close    {"won":true|false}           -> 200 Dispute
//
// The idempotency key is the JSON field "key" of the body. An Idempotency-Key header is
// accepted too, for curl users: it fills an empty "key" and must equal a non-empty one. In a
// path the key is escaped as one segment (url.PathEscape), so "/" in a key is fine.
//
// Errors are problem+json (RFC 9457) with these codes:
//
//	bad_request            400  ErrInvalidRequest (malformed JSON, invalid field)
//	not_found              404  ErrNotFound
//	key_reused             409  ErrKeyReused
//	refund_exceeds_charge  422  ErrRefundExceedsCharge
//	not_refundable         422  ErrNotRefundable
//	key_canceled           409  ErrKeyCanceled (a charge under a canceled key)
//	cancel_unsupported     501  ErrCancelUnsupported
//	lookup_unsupported     501  ErrLookupUnsupported (a charge looked up by key at a key-less sandbox)
//	provider_error         502  outcome unknown (tok_fail, the provider's own store failing)
//	provider_timeout       504  outcome unknown (the handler's deadline passed)
//	unknown_route          404  no such route; deliberately not not_found, so that a wrong
//	                            base URL can never read as "no charge has this key"
//
// A request that takes longer than 5 minutes is abandoned; tok_timeout uses that: the charge
// is recorded, then the handler answers only when the client gives up or 5 minutes pass.

// Problem codes of the provider's HTTP API.
const (
	CodeBadRequest          = "bad_request"
	CodeNotFound            = "not_found"
	CodeKeyReused           = "key_reused"
	CodeRefundExceedsCharge = "refund_exceeds_charge"
	CodeNotRefundable       = "not_refundable"
	CodeKeyCanceled         = "key_canceled"
	CodeCancelUnsupported   = "cancel_unsupported"
	CodeLookupUnsupported   = "lookup_unsupported"
	CodeProviderError       = "provider_error"
	CodeProviderTimeout     = "provider_timeout"
	CodeUnknownRoute        = "unknown_route"
)

// IdempotencyKeyHeader may carry the key of a POST instead of the body's "key".
const IdempotencyKeyHeader = "Idempotency-Key"

const (
	handlerTimeout = 5 * time.Minute
	maxBodyBytes   = 64 << 10
)

// definitive maps the definitive errors to their problem status and code, in both directions.
var definitive = []struct {
	err    error
	status int
	code   string
	title  string
}{
	{ErrInvalidRequest, http.StatusBadRequest, CodeBadRequest, "Invalid request"},
	{ErrNotFound, http.StatusNotFound, CodeNotFound, "Not found"},
	{ErrKeyReused, http.StatusConflict, CodeKeyReused, "Idempotency key reused with different parameters"},
	{ErrRefundExceedsCharge, http.StatusUnprocessableEntity, CodeRefundExceedsCharge, "Refunds would exceed the charged amount"},
	{ErrNotRefundable, http.StatusUnprocessableEntity, CodeNotRefundable, "Charge is not refundable"},
	{ErrKeyCanceled, http.StatusConflict, CodeKeyCanceled, "Charge key was canceled"},
	{ErrCancelUnsupported, http.StatusNotImplemented, CodeCancelUnsupported, "Cancel is not supported"},
	{ErrLookupUnsupported, http.StatusNotImplemented, CodeLookupUnsupported, "Look-up is not supported this way"},
}

// ErrorCode is the problem code of the provider's API for a definitive error (one of the
// definitive errors, or an error wrapping one), and "" for any other: what a caller records
// of a refusal, whether the provider is reached over HTTP or in process.
func ErrorCode(err error) string {
	var re *RemoteError
	if errors.As(err, &re) && re.sentinel != nil {
		return re.Code
	}
	for _, d := range definitive {
		if errors.Is(err, d.err) {
			return d.code
		}
	}
	return ""
}

type handler struct {
	p      Provider
	logger *slog.Logger
}

// NewHandler serves p over HTTP (see the API above). logger may be nil.
func NewHandler(p Provider, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{p: p, logger: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", h.charge)
	mux.HandleFunc("POST /refunds", h.refund)
	mux.HandleFunc("GET /charges/{key}", h.lookupCharge)
	mux.HandleFunc("GET /refunds/{key}", h.lookupRefund)
	mux.HandleFunc("POST /charges/{key}/cancel", h.cancelCharge)
	mux.HandleFunc("GET /charges", h.listCharges)
	mux.HandleFunc("POST /cards/fingerprint", h.cardFingerprint)
	mux.HandleFunc("GET /capability", h.capability)
	if sb, ok := p.(*Sandbox); ok {
		// The sandbox's dashboard: what a merchant (or a test, or a demo) does at the
		// processor outside tekrar.
		d := &dashboard{h: h, sb: sb}
		mux.HandleFunc("POST /dashboard/charges/{id}/refunds", d.refund)
		mux.HandleFunc("POST /dashboard/charges/{id}/disputes", d.openDispute)
		mux.HandleFunc("POST /dashboard/disputes/{id}/close", d.closeDispute)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, r, problem.New(http.StatusNotFound, CodeUnknownRoute, "No such route").
			WithDetail(r.Method+" "+r.URL.Path+" is not part of the provider API"))
	})
	return mux
}

func (h *handler) charge(w http.ResponseWriter, r *http.Request) {
	var req ChargeRequest
	if !h.decode(w, r, &req, &req.Key) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	c, err := h.p.Charge(ctx, req)
	h.answer(w, r, c, err)
}

func (h *handler) refund(w http.ResponseWriter, r *http.Request) {
	var req RefundRequest
	if !h.decode(w, r, &req, &req.Key) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	rf, err := h.p.Refund(ctx, req)
	h.answer(w, r, rf, err)
}

func (h *handler) lookupCharge(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	c, err := h.p.LookupCharge(ctx, r.PathValue("key"))
	h.answer(w, r, c, err)
}

func (h *handler) cancelCharge(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	c, err := h.p.CancelCharge(ctx, r.PathValue("key"))
	h.answer(w, r, c, err)
}

func (h *handler) listCharges(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("reference") {
		h.chargesByReference(w, r)
		return
	}
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		h.answer(w, r, nil, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	page, err := h.p.ListCharges(ctx, q)
	h.answer(w, r, page, err)
}

// chargesByReference answers a look-up by reference; a provider that is no ReferenceFinder
// answers it as one that finds no charge this way.
func (h *handler) chargesByReference(w http.ResponseWriter, r *http.Request) {
	f, ok := h.p.(ReferenceFinder)
	if !ok {
		h.answer(w, r, nil, fmt.Errorf("%w: the provider finds no charge by reference", ErrLookupUnsupported))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	charges, err := f.ChargesByReference(ctx, r.URL.Query().Get("reference"))
	h.answer(w, r, ChargePage{Charges: charges}, err)
}

// CapabilityAnswer is the body of GET /capability: the provider's row of the capability
// table by its name, and its key window, which a sandbox with a KeyWindow shortens.
type CapabilityAnswer struct {
	Provider  string `json:"provider"`
	KeyWindow string `json:"key_window"` // a Go duration; the row's own for a row without one
}

func (h *handler) capability(w http.ResponseWriter, r *http.Request) {
	c := PromisesOf(h.p)
	h.answer(w, r, CapabilityAnswer{Provider: c.Provider, KeyWindow: c.KeyWindow.String()}, nil)
}

func (h *handler) cardFingerprint(w http.ResponseWriter, r *http.Request) {
	var req CardFingerprintRequest
	var noKey string
	if !h.decode(w, r, &req, &noKey) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	fp, err := h.p.CardFingerprint(ctx, req.CardToken)
	h.answer(w, r, CardFingerprintAnswer{Fingerprint: fp}, err)
}

// parseListQuery reads the query of GET /charges; a malformed one is ErrInvalidRequest.
func parseListQuery(v url.Values) (ChargeListQuery, error) {
	var q ChargeListQuery
	var err error
	if q.Since, err = time.Parse(time.RFC3339Nano, v.Get("since")); err != nil {
		return q, fmt.Errorf("%w: since must be an RFC 3339 time", ErrInvalidRequest)
	}
	if q.Until, err = time.Parse(time.RFC3339Nano, v.Get("until")); err != nil {
		return q, fmt.Errorf("%w: until must be an RFC 3339 time", ErrInvalidRequest)
	}
	q.After = v.Get("after")
	if l := v.Get("limit"); l != "" {
		if q.Limit, err = strconv.Atoi(l); err != nil || q.Limit <= 0 {
			return q, fmt.Errorf("%w: limit must be 1 to %d", ErrInvalidRequest, MaxListLimit)
		}
	}
	return q, q.validate()
}

func (h *handler) lookupRefund(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	rf, err := h.p.LookupRefund(ctx, r.PathValue("key"))
	h.answer(w, r, rf, err)
}

// decode reads a JSON body into v, takes the key from the header when the body has none,
// and answers 400 itself when it cannot.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any, key *string) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		if hk := r.Header.Get(IdempotencyKeyHeader); hk != "" {
			switch *key {
			case "":
				*key = hk
			case hk:
			default:
				err = fmt.Errorf("the %s header and the body's key differ", IdempotencyKeyHeader)
			}
		}
	}
	if err != nil {
		problem.Write(w, r, problem.New(http.StatusBadRequest, CodeBadRequest, "Invalid request").
			WithDetail("the body must be one JSON object of the documented fields: "+err.Error()))
		return false
	}
	return true
}

// answer writes v, or the problem err maps to.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err == nil {
		body, merr := json.Marshal(v)
		if merr != nil {
			h.logger.Error("psp: encode response", "err", merr, "path", r.URL.Path)
			problem.Write(w, r, problem.Internal())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return
	}
	for _, d := range definitive {
		if errors.Is(err, d.err) {
			problem.Write(w, r, problem.New(d.status, problem.Code(d.code), d.title).WithDetail(err.Error()))
			return
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// Usually the client has gone and reads nothing; say it anyway.
		h.logger.Info("psp: request ended before the provider answered", "method", r.Method, "path", r.URL.Path, "err", err)
		problem.Write(w, r, problem.New(http.StatusGatewayTimeout, CodeProviderTimeout, "Provider timed out").
			WithDetail("the outcome is unknown: look the key up before trying again"))
		return
	}
	h.logger.Warn("psp: provider error", "method", r.Method, "path", r.URL.Path, "err", err)
	problem.Write(w, r, problem.New(http.StatusBadGateway, CodeProviderError, "Provider error").
		WithDetail("the outcome is unknown: look the key up before trying again"))
}

// Client is a Provider reached over HTTP, such as a `tekrar psp` process. The caller's
// context bounds every call; the client adds no timeout of its own.
type Client struct {
	base string
	hc   *http.Client

	mu         sync.Mutex
	capability *Capability // the server's row, once it answered (Capability)
}

var _ Provider = (*Client)(nil)

// NewClient returns a client of the provider at baseURL ("http://127.0.0.1:8099"). hc nil
// means http.DefaultClient.
func NewClient(baseURL string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	for len(baseURL) > 0 && baseURL[len(baseURL)-1] == '/' {
		baseURL = baseURL[:len(baseURL)-1]
	}
	return &Client{base: baseURL, hc: hc}
}

// Charge implements Provider.
func (c *Client) Charge(ctx context.Context, req ChargeRequest) (Charge, error) {
	if err := req.validate(); err != nil {
		return Charge{}, err
	}
	var ch Charge
	err := c.do(ctx, http.MethodPost, "/charges", req, &ch, false)
	if err == nil && (!validCharge(ch) || ch.Status == StatusCanceled) {
		err = fmt.Errorf("psp: POST /charges: the provider answered an unreadable charge (status %q)", ch.Status)
	}
	return ch, err
}

// Refund implements Provider.
func (c *Client) Refund(ctx context.Context, req RefundRequest) (Refund, error) {
	if err := req.validate(); err != nil {
		return Refund{}, err
	}
	var rf Refund
	err := c.do(ctx, http.MethodPost, "/refunds", req, &rf, true)
	if err == nil && (rf.ID == "" || rf.Status != RefundSucceeded) {
		err = fmt.Errorf("psp: POST /refunds: the provider answered an unreadable refund (status %q)", rf.Status)
	}
	return rf, err
}

// LookupCharge implements Provider.
func (c *Client) LookupCharge(ctx context.Context, key string) (Charge, error) {
	if err := checkKey(key); err != nil {
		return Charge{}, err
	}
	var ch Charge
	err := c.do(ctx, http.MethodGet, "/charges/"+url.PathEscape(key), nil, &ch, true)
	if err == nil && !validCharge(ch) {
		err = fmt.Errorf("psp: GET /charges: the provider answered an unreadable charge (status %q)", ch.Status)
	}
	return ch, err
}

// CancelCharge implements Provider.
func (c *Client) CancelCharge(ctx context.Context, key string) (Charge, error) {
	if err := checkKey(key); err != nil {
		return Charge{}, err
	}
	var ch Charge
	err := c.do(ctx, http.MethodPost, "/charges/"+url.PathEscape(key)+"/cancel", nil, &ch, false)
	if err == nil && !validCharge(ch) {
		err = fmt.Errorf("psp: POST /charges/cancel: the provider answered an unreadable charge (status %q)", ch.Status)
	}
	return ch, err
}

// LookupRefund implements Provider.
func (c *Client) LookupRefund(ctx context.Context, key string) (Refund, error) {
	if err := checkKey(key); err != nil {
		return Refund{}, err
	}
	var rf Refund
	err := c.do(ctx, http.MethodGet, "/refunds/"+url.PathEscape(key), nil, &rf, true)
	if err == nil && (rf.ID == "" || rf.Status != RefundSucceeded) {
		err = fmt.Errorf("psp: GET /refunds: the provider answered an unreadable refund (status %q)", rf.Status)
	}
	return rf, err
}

// ListCharges implements Provider.
func (c *Client) ListCharges(ctx context.Context, q ChargeListQuery) (ChargePage, error) {
	if err := q.validate(); err != nil {
		return ChargePage{}, err
	}
	v := url.Values{}
	v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	if q.After != "" {
		v.Set("after", q.After)
	}
	v.Set("limit", strconv.Itoa(q.Limit))
	var page ChargePage
	if err := c.do(ctx, http.MethodGet, "/charges?"+v.Encode(), nil, &page, true); err != nil {
		return ChargePage{}, err
	}
	for _, ch := range page.Charges {
		if !validCharge(ch) {
			return ChargePage{}, fmt.Errorf("psp: GET /charges: the provider listed an unreadable charge (status %q)", ch.Status)
		}
	}
	if len(page.Charges) > q.Limit || (page.Next != "" && len(page.Charges) == 0) {
		return ChargePage{}, errors.New("psp: GET /charges: the provider answered an unreadable page")
	}
	return page, nil
}

var _ ReferenceFinder = (*Client)(nil)

// ChargesByReference implements ReferenceFinder: the provider's answer, or
// ErrLookupUnsupported if it finds no charge by reference.
func (c *Client) ChargesByReference(ctx context.Context, reference string) ([]Charge, error) {
	if reference == "" || len(reference) > maxTextLen {
		return nil, fmt.Errorf("%w: reference must be 1 to %d characters", ErrInvalidRequest, maxTextLen)
	}
	var page ChargePage
	if err := c.do(ctx, http.MethodGet, "/charges?"+url.Values{"reference": {reference}}.Encode(), nil, &page, true); err != nil {
		return nil, err
	}
	for _, ch := range page.Charges {
		if !validCharge(ch) || ch.Description != reference {
			return nil, fmt.Errorf("psp: GET /charges: the provider answered a charge of another reference or an unreadable one (status %q)", ch.Status)
		}
	}
	return page.Charges, nil
}

var _ Promiser = (*Client)(nil)

// capabilityTimeout bounds the one GET /capability of Capability, which takes no context.
const capabilityTimeout = 5 * time.Second

// Capability implements Promiser: the server's row (GET /capability), asked once and kept.
// Until the server has answered (it is down, or an older server does not know the route)
// the answer is Undeclared and the next call asks again: recovery is conservative
// meanwhile, never more trusting than the provider said. A row the table does not name is
// Undeclared too, and kept.
func (c *Client) Capability() Capability {
	c.mu.Lock()
	known := c.capability
	c.mu.Unlock()
	if known != nil {
		return *known
	}
	// Asked without the lock: callers at once while the server is slow each wait for their
	// own answer, not for each other's.
	ctx, cancel := context.WithTimeout(context.Background(), capabilityTimeout)
	defer cancel()
	var a CapabilityAnswer
	if err := c.do(ctx, http.MethodGet, "/capability", nil, &a, false); err != nil {
		return Undeclared()
	}
	row, ok := CapabilityOf(a.Provider)
	if !ok {
		row = Undeclared()
	} else if w, err := time.ParseDuration(a.KeyWindow); err == nil && row.KeysReplay == SupportYes && w > 0 && w < row.KeyWindow {
		// Only ever a shorter window than the row's: a server cannot promise more than its
		// row does.
		row.KeyWindow = w
	}
	c.mu.Lock()
	c.capability = &row
	c.mu.Unlock()
	return row
}

// CardFingerprint implements Provider.
func (c *Client) CardFingerprint(ctx context.Context, token string) (string, error) {
	if err := checkCardToken(token); err != nil {
		return "", err
	}
	var a CardFingerprintAnswer
	if err := c.do(ctx, http.MethodPost, "/cards/fingerprint", CardFingerprintRequest{CardToken: token}, &a, true); err != nil {
		return "", err
	}
	if a.Fingerprint == "" || len(a.Fingerprint) > MaxCardFingerprint {
		return "", errors.New("psp: POST /cards/fingerprint: the provider answered an unreadable fingerprint")
	}
	return a.Fingerprint, nil
}

func validCharge(c Charge) bool {
	return c.ID != "" && (c.Status == StatusSucceeded || c.Status == StatusDeclined || c.Status == StatusCanceled) &&
		c.Refunded >= 0 && c.Refunded <= c.Amount
}

// RemoteError is a problem the provider answered. Unwrap gives the matching definitive
// error, or nil when the outcome is unknown (5xx, or a code this client does not know).
type RemoteError struct {
	Method, Path string
	Status       int
	Code         string
	Detail       string
	sentinel     error
}

func (e *RemoteError) Error() string {
	s := fmt.Sprintf("psp: %s %s: %d %s", e.Method, e.Path, e.Status, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *RemoteError) Unwrap() error { return e.sentinel }

// do sends one request and decodes a 200 into out. notFoundOK says whether a not_found
// problem is a legitimate answer of this route (it never is for a new charge).
func (c *Client) do(ctx context.Context, method, path string, in, out any, notFoundOK bool) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("psp: %s %s: encode: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("psp: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json, "+problem.ContentType)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// Transport failure or the context's end: the request may have been processed.
		return fmt.Errorf("psp: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("psp: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("psp: %s %s: decode answer: %w", method, path, err)
		}
		return nil
	}
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(raw, &p) // a body that is not a problem leaves the code empty: unknown
	re := &RemoteError{Method: method, Path: path, Status: resp.StatusCode, Code: p.Code, Detail: p.Detail}
	if re.Code == "" {
		re.Code = "(no problem code)"
	}
	if resp.Header.Get("Content-Type") == problem.ContentType {
		for _, d := range definitive {
			if d.code == p.Code && d.status == resp.StatusCode && (d.err != ErrNotFound || notFoundOK) {
				re.sentinel = d.err
			}
		}
	}
	return re
}
