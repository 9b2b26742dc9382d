package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/tekrar/tekrar/checkout/psp"
)

// stripeError is an error as stripe-go returns it for an answer of status with the given
// type and code, and headers (name, value pairs).
func stripeError(t *testing.T, status int, typ stripego.ErrorType, code string, headers ...string) *stripego.Error {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	e := &stripego.Error{HTTPStatusCode: status, Type: typ, Code: stripego.ErrorCode(code), Msg: "test"}
	e.LastResponse = &stripego.APIResponse{Header: h, StatusCode: status}
	return e
}

// TestErrorOf is the table of errorOf: each answer of Stripe, what tekrar makes of it.
func TestErrorOf(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		want    error // a psp sentinel, ErrRetrySameKey, or nil for "unknown and none of them"
		decline string
		unknown bool
	}{
		{"card_error with a decline code", func() error {
			e := stripeError(t, 402, stripego.ErrorTypeCard, "card_declined")
			e.DeclineCode = "insufficient_funds"
			e.PaymentIntent = &stripego.PaymentIntent{ID: "pi_1"}
			return e
		}(), nil, "insufficient_funds", true},
		{"card_error without a decline code", stripeError(t, 402, stripego.ErrorTypeCard, "expired_card"), nil, "expired_card", true},
		{"invalid_request_error", stripeError(t, 400, stripego.ErrorTypeInvalidRequest, "parameter_missing"), psp.ErrInvalidRequest, "", false},
		{"resource_missing", stripeError(t, 404, stripego.ErrorTypeInvalidRequest, "resource_missing"), psp.ErrNotFound, "", false},
		{"refund of a refunded charge", stripeError(t, 400, stripego.ErrorTypeInvalidRequest, "charge_already_refunded"), psp.ErrRefundExceedsCharge, "", false},
		{"refund beyond the charge", stripeError(t, 400, stripego.ErrorTypeInvalidRequest, "amount_too_large"), psp.ErrRefundExceedsCharge, "", false},
		{"idempotency_error", stripeError(t, 400, stripego.ErrorTypeIdempotency, ""), psp.ErrKeyReused, "", false},
		{"idempotency key in use", stripeError(t, 409, stripego.ErrorTypeIdempotency, "idempotency_key_in_use"), ErrRetrySameKey, "", true},
		{"429 rate limit", stripeError(t, 429, stripego.ErrorTypeInvalidRequest, "rate_limit"), ErrRetrySameKey, "", true},
		{"Stripe-Should-Retry: true", stripeError(t, 400, stripego.ErrorTypeInvalidRequest, "lock_timeout", "Stripe-Should-Retry", "true"), ErrRetrySameKey, "", true},
		{"Stripe-Should-Retry: true on a 500", stripeError(t, 500, stripego.ErrorTypeAPI, "", "Stripe-Should-Retry", "true"), ErrRetrySameKey, "", true},
		{"500 api_error", stripeError(t, 500, stripego.ErrorTypeAPI, "", "Stripe-Should-Retry", "false"), nil, "", true},
		{"502 without a Stripe body", stripeError(t, 502, "", ""), nil, "", true},
		{"401 wrong key", stripeError(t, 401, stripego.ErrorTypeInvalidRequest, ""), nil, "", true},
		{"no answer", &url.Error{Op: "Post", URL: "http://x", Err: errors.New("connection reset")}, nil, "", true},
		{"context deadline", fmt.Errorf("wrapped: %w", context.DeadlineExceeded), nil, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := errorOf("create payment intent", tc.err)
			if got == nil {
				t.Fatal("errorOf = nil")
			}
			var d *DeclineError
			if isDecline := errors.As(got, &d); isDecline != (tc.decline != "") {
				t.Fatalf("errorOf = %v; a decline: %v, want %v", got, isDecline, tc.decline != "")
			}
			if d != nil && d.Code != tc.decline {
				t.Errorf("decline code = %q, want %q", d.Code, tc.decline)
			}
			if tc.want != nil && !errors.Is(got, tc.want) {
				t.Errorf("errorOf = %v, want %v", got, tc.want)
			}
			if u := psp.IsOutcomeUnknown(got); u != tc.unknown {
				t.Errorf("IsOutcomeUnknown(%v) = %v, want %v", got, u, tc.unknown)
			}
		})
	}
}

// TestErrorOfFollowsTheCapabilityRow drives errorOf through every rule of Stripe's row of
// the capability table: the answer it maps to is in the charge answer table's row the rule
// names (a decline is a result).
func TestErrorOfFollowsTheCapabilityRow(t *testing.T) {
	row := (&Provider{}).Capability()
	if row.Provider != psp.ProviderStripe || len(row.Errors) == 0 {
		t.Fatalf("Capability() = %+v, want Stripe's row", row)
	}
	answers := map[string]error{
		"402 card_error (decline_code)":                        stripeError(t, 402, stripego.ErrorTypeCard, "card_declined"),
		"400 invalid_request_error":                            stripeError(t, 400, stripego.ErrorTypeInvalidRequest, "parameter_invalid_integer"),
		"idempotency_error (key reused with other parameters)": stripeError(t, 400, stripego.ErrorTypeIdempotency, ""),
		"429, or Stripe-Should-Retry: true":                    stripeError(t, 429, stripego.ErrorTypeInvalidRequest, "rate_limit"),
		"500 api_error (saved under the key)":                  stripeError(t, 500, stripego.ErrorTypeAPI, ""),
		"no answer (network error)":                            &url.Error{Op: "Post", URL: "http://x", Err: errors.New("EOF")},
	}
	for _, rule := range row.Errors {
		answer, ok := answers[rule.Answer]
		if !ok {
			t.Errorf("no Stripe answer in this test for the rule %q", rule.Answer)
			continue
		}
		got := errorOf("create payment intent", answer)
		if errors.As(got, new(*DeclineError)) {
			got = nil // a charge's result
		}
		if v := psp.AnswerOf(psp.OpCharge, got).Verdict; v != rule.Verdict() {
			t.Errorf("%s: errorOf = %v, verdict %s; the rule says %s", rule.Answer, got, v, rule.Verdict())
		}
	}
}
