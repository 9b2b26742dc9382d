package psp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/problem"
)

// post sends a raw request to h and returns the status, content type and decoded body.
func serveRaw(t *testing.T, h http.Handler, method, path, body string, header map[string]string) (int, string, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, rec.Header().Get("Content-Type"), m
}

func TestHandlerWire(t *testing.T) {
	sb := newSandbox(t, SandboxOptions{})
	h := NewHandler(sb, discardLogger())
	cases := []struct {
		name       string
		method     string
		path, body string
		header     map[string]string
		wantStatus int
		wantCode   string   // problem code; "" for a 200
		wantFields []string // members of a 200 body
	}{
		{"charge", "POST", "/charges", `{"key":"w1","amount":100,"currency":"EUR","card_token":"tok_visa"}`, nil,
			200, "", []string{"id", "key", "amount", "currency", "status", "decline_code", "card_brand", "card_last4", "card_fingerprint", "created"}},
		{"key from the header", "POST", "/charges", `{"amount":100,"currency":"EUR","card_token":"tok_visa"}`,
			map[string]string{IdempotencyKeyHeader: "w2"}, 200, "", []string{"id"}},
		{"header and body keys differ", "POST", "/charges", `{"key":"w3","amount":100,"currency":"EUR","card_token":"tok_visa"}`,
			map[string]string{IdempotencyKeyHeader: "w4"}, 400, CodeBadRequest, nil},
		{"declined is a 200", "POST", "/charges", `{"key":"w5","amount":100,"currency":"EUR","card_token":"tok_declined"}`, nil,
			200, "", []string{"decline_code"}},
		{"not JSON", "POST", "/charges", `amount=100`, nil, 400, CodeBadRequest, nil},
		{"unknown field", "POST", "/charges", `{"key":"w6","amount":100,"currency":"EUR","token":"tok_visa"}`, nil, 400, CodeBadRequest, nil},
		{"two values", "POST", "/charges", `{"key":"w7","amount":100,"currency":"EUR","card_token":"tok_visa"} {}`, nil, 400, CodeBadRequest, nil},
		{"invalid amount", "POST", "/charges", `{"key":"w8","amount":0,"currency":"EUR","card_token":"tok_visa"}`, nil, 400, CodeBadRequest, nil},
		{"key reused", "POST", "/charges", `{"key":"w1","amount":101,"currency":"EUR","card_token":"tok_visa"}`, nil, 409, CodeKeyReused, nil},
		{"provider error", "POST", "/charges", `{"key":"w9","amount":100,"currency":"EUR","card_token":"tok_fail"}`, nil, 502, CodeProviderError, nil},
		{"lookup", "GET", "/charges/w1", "", nil, 200, "", []string{"card_last4"}},
		{"lookup unknown", "GET", "/charges/nope", "", nil, 404, CodeNotFound, nil},
		{"refund unknown charge", "POST", "/refunds", `{"key":"r1","charge_id":"ch_nope","amount":1}`, nil, 404, CodeNotFound, nil},
		{"refund lookup unknown", "GET", "/refunds/nope", "", nil, 404, CodeNotFound, nil},
		{"list", "GET", "/charges?since=2030-01-01T00:00:00Z&until=2031-01-01T00:00:00Z&limit=2", "", nil, 200, "", []string{"charges", "next"}},
		{"list without a window", "GET", "/charges", "", nil, 400, CodeBadRequest, nil},
		{"list backwards window", "GET", "/charges?since=2031-01-01T00:00:00Z&until=2030-01-01T00:00:00Z", "", nil, 400, CodeBadRequest, nil},
		{"list limit too large", "GET", "/charges?since=2030-01-01T00:00:00Z&until=2031-01-01T00:00:00Z&limit=1001", "", nil, 400, CodeBadRequest, nil},
		{"list limit not a number", "GET", "/charges?since=2030-01-01T00:00:00Z&until=2031-01-01T00:00:00Z&limit=x", "", nil, 400, CodeBadRequest, nil},
		{"list after unknown charge", "GET", "/charges?since=2030-01-01T00:00:00Z&until=2031-01-01T00:00:00Z&after=ch_nope", "", nil, 404, CodeNotFound, nil},
		{"unknown route", "GET", "/v1/charges", "", nil, 404, CodeUnknownRoute, nil},
		{"wrong method", "DELETE", "/charges/w1", "", nil, 404, CodeUnknownRoute, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, ctype, body := serveRaw(t, h, tc.method, tc.path, tc.body, tc.header)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %v", status, tc.wantStatus, body)
			}
			if tc.wantCode != "" {
				if ctype != problem.ContentType || body["code"] != tc.wantCode {
					t.Fatalf("answer %s %v, want a problem with code %s", ctype, body, tc.wantCode)
				}
				return
			}
			if ctype != "application/json" {
				t.Errorf("content type %q", ctype)
			}
			for _, f := range tc.wantFields {
				if _, ok := body[f]; !ok {
					t.Errorf("answer %v has no member %q", body, f)
				}
			}
		})
	}

	// A refund answers with snake_case members too.
	c, err := sb.LookupCharge(testContext(t), "w1")
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := serveRaw(t, h, "POST", "/refunds", `{"key":"r2","charge_id":"`+c.ID+`","amount":100}`, nil)
	if status != 200 || body["charge_id"] != c.ID || body["currency"] != "EUR" || body["created"] == nil {
		t.Errorf("refund answer %d %v", status, body)
	}
	status, _, body = serveRaw(t, h, "POST", "/refunds", `{"key":"r3","charge_id":"`+c.ID+`","amount":1}`, nil)
	if status != 422 || body["code"] != CodeRefundExceedsCharge {
		t.Errorf("over-refund answer %d %v", status, body)
	}
	d, err := sb.LookupCharge(testContext(t), "w5")
	if err != nil {
		t.Fatal(err)
	}
	status, _, body = serveRaw(t, h, "POST", "/refunds", `{"key":"r4","charge_id":"`+d.ID+`","amount":1}`, nil)
	if status != 422 || body["code"] != CodeNotRefundable {
		t.Errorf("refund of a declined charge: %d %v", status, body)
	}
}

// fakeProvider returns err from every call.
type fakeProvider struct{ err error }

func (f fakeProvider) Charge(context.Context, ChargeRequest) (Charge, error) { return Charge{}, f.err }
func (f fakeProvider) Refund(context.Context, RefundRequest) (Refund, error) { return Refund{}, f.err }
func (f fakeProvider) LookupCharge(context.Context, string) (Charge, error)  { return Charge{}, f.err }
func (f fakeProvider) LookupRefund(context.Context, string) (Refund, error)  { return Refund{}, f.err }
func (f fakeProvider) CancelCharge(context.Context, string) (Charge, error)  { return Charge{}, f.err }
func (f fakeProvider) ListCharges(context.Context, ChargeListQuery) (ChargePage, error) {
	return ChargePage{}, f.err
}
func (f fakeProvider) CardFingerprint(context.Context, string) (string, error) { return "", f.err }

// TestClientErrorMapping checks that each answer of a provider maps to the right error,
// and that nothing but a genuine problem of the provider API reads as definitive.
func TestClientErrorMapping(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	cases := []struct {
		name    string
		baseURL func(t *testing.T) string
		wantErr error // nil: an unknown outcome
	}{
		{"provider store down", func(t *testing.T) string {
			return serve(t, NewHandler(fakeProvider{errors.New("connection refused")}, discardLogger()))
		}, nil},
		{"provider deadline", func(t *testing.T) string {
			return serve(t, NewHandler(fakeProvider{context.DeadlineExceeded}, discardLogger()))
		}, nil},
		{"definitive error passes through", func(t *testing.T) string {
			return serve(t, NewHandler(fakeProvider{ErrKeyReused}, discardLogger()))
		}, ErrKeyReused},
		{"a plain 404 server", func(t *testing.T) string { return serve(t, http.NotFoundHandler()) }, nil},
		{"a 404 problem of another API", func(t *testing.T) string {
			return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				problem.Write(w, r, problem.New(404, "route_missing", "Not found"))
			}))
		}, nil},
		{"200 that is not a charge", func(t *testing.T) string {
			return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"ch_1","status":"pending"}`)
			}))
		}, nil},
		{"200 that is not JSON", func(t *testing.T) string {
			return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `<html>ok</html>`)
			}))
		}, nil},
		{"nothing listening", func(t *testing.T) string { return closedURL }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(tc.baseURL(t), nil)
			_, chargeErr := c.Charge(testContext(t), visaCharge("k1", 100))
			_, lookupErr := c.LookupCharge(testContext(t), "k1")
			_, refundErr := c.Refund(testContext(t), RefundRequest{Key: "r1", ChargeID: "ch_1", Amount: 1})
			for name, err := range map[string]error{"Charge": chargeErr, "LookupCharge": lookupErr, "Refund": refundErr} {
				if err == nil {
					t.Errorf("%s: no error", name)
					continue
				}
				if tc.wantErr == nil {
					if !IsOutcomeUnknown(err) {
						t.Errorf("%s: %v reads as definitive, want an unknown outcome", name, err)
					}
					for _, d := range definitiveErrors {
						if errors.Is(err, d) {
							t.Errorf("%s: %v is %v", name, err, d)
						}
					}
				} else if !errors.Is(err, tc.wantErr) {
					t.Errorf("%s: %v, want %v", name, err, tc.wantErr)
				}
			}
		})
	}

	// A not_found problem is "no such charge" for a lookup, but never for a new charge.
	url := serve(t, NewHandler(fakeProvider{ErrNotFound}, discardLogger()))
	c := NewClient(url, nil)
	if _, err := c.LookupCharge(testContext(t), "k1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LookupCharge: %v, want ErrNotFound", err)
	}
	if _, err := c.Charge(testContext(t), visaCharge("k1", 100)); !IsOutcomeUnknown(err) {
		t.Errorf("Charge answered not_found: %v, want an unknown outcome", err)
	}
	var re *RemoteError
	if _, err := c.Refund(testContext(t), RefundRequest{Key: "r", ChargeID: "ch_x", Amount: 1}); !errors.As(err, &re) || re.Status != 404 || re.Code != CodeNotFound {
		t.Errorf("Refund error = %v, want a RemoteError 404 not_found", err)
	}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestIsOutcomeUnknown(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrNotFound, false},
		{ErrKeyReused, false},
		{ErrRefundExceedsCharge, false},
		{ErrNotRefundable, false},
		{ErrInvalidRequest, false},
		{errors.New("boom"), true},
		{context.DeadlineExceeded, true},
		{&RemoteError{Status: 502, Code: CodeProviderError}, true},
		{&RemoteError{Status: 409, Code: CodeKeyReused, sentinel: ErrKeyReused}, false},
	}
	for _, tc := range cases {
		if got := IsOutcomeUnknown(tc.err); got != tc.want {
			t.Errorf("IsOutcomeUnknown(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
