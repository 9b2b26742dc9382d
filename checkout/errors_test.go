package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/internal/problem"
)

// TestOneErrorPerCondition: "no such order" was two errors, the sentinel ErrOrderNotFound
// (reads, the console) and a problem built by the refund's claim, which errors.Is did not
// match; a caller had to know which path it took. Every way the domain says that an order,
// a refund or a key does not exist is now the one sentinel, which is also the problem the
// API answers (status from problem.Codes).
func TestOneErrorPerCondition(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	other, _ := e.order("k-other", "tok_visa", 1000)
	unknown := "ord_" + strings.Repeat("0", 32)
	refund := func(order string) error {
		in := RefundInput{Amount: 100}
		body, _ := json.Marshal(in)
		_, err := e.s.CreateRefund(ctx, Request{Client: e.client, Key: "k-refund-" + order, Method: "POST",
			Path: "/v1/orders/" + order + "/refunds", Body: body}, Lookup{}, order, in)
		return err
	}
	stranger := e.client
	stranger.ID = -1 // no client has it: every order is another client's
	for _, tc := range []struct {
		name string
		err  func() error
		want error
		code problem.Code
	}{
		{"get-unknown", func() error { _, err := e.s.GetOrder(ctx, e.client.ID, unknown); return err }, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"get-integer", func() error { _, err := e.s.GetOrder(ctx, e.client.ID, "1"); return err }, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"get-another-clients", func() error { _, err := e.s.GetOrder(ctx, stranger.ID, other); return err }, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"refund-unknown", func() error { return refund(unknown) }, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"refund-integer", func() error { return refund("1") }, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"operator-refund-unknown", func() error { _, err := GetRefundTarget(ctx, e.db, unknown); return err }, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"get-refund-of-unknown-order", func() error {
			_, err := e.s.GetRefund(ctx, e.client.ID, unknown, "rf_"+strings.Repeat("0", 32))
			return err
		}, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"list-refunds-of-another-clients", func() error { _, err := e.s.ListRefunds(ctx, stranger.ID, other); return err }, ErrOrderNotFound, problem.CodeOrderNotFound},
		{"get-unknown-refund", func() error {
			_, err := e.s.GetRefund(ctx, e.client.ID, other, "rf_"+strings.Repeat("0", 32))
			return err
		}, ErrRefundNotFound, problem.CodeRefundNotFound},
		{"get-refund-not-an-id", func() error { _, err := e.s.GetRefund(ctx, e.client.ID, other, "7"); return err }, ErrRefundNotFound, problem.CodeRefundNotFound},
		{"key-unknown", func() error { _, err := e.s.KeyStatus(ctx, e.client.ID, "never-sent"); return err }, ErrKeyNotFound, problem.CodeIdempotencyKeyNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			var p *problem.Problem
			if !errors.Is(err, tc.want) || !errors.As(err, &p) || p.Code != tc.code || p.Status != 404 {
				t.Fatalf("%v (%T), want the %s problem", err, err, tc.code)
			}
		})
	}
	if n := e.count(`SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds made by refused requests", n)
	}
	// The sentinels are shared: answering one with a keyed request's advice leaves it as it was.
	before := string(ErrOrderNotFound.(*problem.Problem).Body("/x"))
	_ = ErrOrderNotFound.(*problem.Problem).Advised()
	if after := string(ErrOrderNotFound.(*problem.Problem).Body("/x")); after != before {
		t.Fatalf("advising the sentinel changed it: %s", after)
	}
}

// TestStoredProblemBodiesKeepTheirBytes: a keyed request's problem that is stored and
// replayed (payment_abandoned, payment_declined) is built from problem.Codes now; its bytes
// are those it had when the domain chose its status and title, so that a body stored before
// and one stored after are the same answer.
func TestStoredProblemBodiesKeepTheirBytes(t *testing.T) {
	const id = "ord_0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		p    *problem.Problem
		want string
	}{
		{"abandoned-fenced", canceledAnswer(id, false),
			`{"type":"/problems/payment_abandoned","title":"Payment abandoned","status":409,"detail":"the request was interrupted before the card was charged and was not retried in time; nothing was charged and the order is canceled. Pay again with a new key","instance":"/v1/orders","code":"payment_abandoned","order_id":"` + id + `","retryable":false,"safe_new_key":true}`},
		{"abandoned-owed", canceledAnswer(id, true),
			`{"type":"/problems/payment_abandoned","title":"Payment abandoned","status":409,"detail":"the request was interrupted before the card was charged and was not retried in time; the order is canceled. If the payment provider still completes the interrupted charge, it is refunded in full automatically. Pay again with a new key","instance":"/v1/orders","code":"payment_abandoned","order_id":"` + id + `","retryable":false,"safe_new_key":true}`},
		{"declined", declinedAnswer(id, "card_declined"),
			`{"type":"/problems/payment_declined","title":"Payment declined","status":402,"detail":"the card was declined; the order is kept in status declined","instance":"/v1/orders","code":"payment_declined","decline_code":"card_declined","order_id":"` + id + `","retryable":false,"safe_new_key":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.p.Body("/v1/orders")); got != tc.want {
				t.Fatalf("body\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// A key reused for another request is safe_new_key false (tekrar cannot tell a new purchase
// from a retry whose body changed), so its detail may not tell the client to use a new key
// unconditionally; it says what to do either way, on another body and on another endpoint.
func TestKeyReusedAdviceAgreesWithItsDetail(t *testing.T) {
	for _, k := range []*Key{{Method: "POST", Path: "/v1/orders"}, {Method: "POST", Path: "/v1/orders/ord_1/refunds"}} {
		p := keyed.ProblemReused(k, "POST", "/v1/orders")
		if p.Extensions["safe_new_key"] != false || p.Extensions["retryable"] != false {
			t.Errorf("%s %s: %+v, want safe_new_key false, retryable false", k.Method, k.Path, p.Extensions)
		}
		if strings.Contains(p.Detail, "use a new key") || !strings.Contains(p.Detail, "resend its body") {
			t.Errorf("%s %s: detail %q contradicts safe_new_key false, or says nothing of a retry", k.Method, k.Path, p.Detail)
		}
	}
}
