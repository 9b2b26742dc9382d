package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/sdk"
	"github.com/tekrar/tekrar/internal/apptest"
)

// pay is docs/clients.md's Go snippet: the block there is this function's body, line for
// line (docs/snippets_test.go checks), so that what merchants copy is compiled and run.
func pay(ctx context.Context, baseURL, secret, token string) string {
	c := sdk.New(baseURL, secret) // sdk.WithPolicy, WithHTTPClient
	key := sdk.NewKey()           // store it with the purchase first
	order, k, err := c.CreateOrder(ctx, key, sdk.OrderInput{
		Currency: "TRY", Amount: 9000,
		Items:   []sdk.Item{{SKU: "LATTE", Name: "Latte", Quantity: 2, UnitAmount: 4500}},
		Payment: sdk.Payment{CardToken: token},
	})
	var p *sdk.Error
	var unknown *sdk.UnknownOutcome
	switch {
	case err == nil:
		return fmt.Sprintf("%s %s (replayed: %t, key kept until %s)", order.ID, order.Status, k.Replayed, k.Expires)
	case errors.Is(err, sdk.ErrPaymentDeclined):
		errors.As(err, &p) // p is filled only here: errors.Is does not fill it
		// final; another card is another intent, under a new key
		return "declined: order " + p.OrderID
	case errors.As(err, &p) && p.SafeNewKey:
		return fmt.Sprintf("refused, nothing charged: %s %v", p.Code, p.Fields)
	case errors.As(err, &p), errors.As(err, &unknown), ctx.Err() != nil:
		// unresolved after the policy's attempts: keep the purchase and its key, retry later
		return "unresolved: keep key " + key
	default:
		return "error: " + err.Error()
	}
}

// TestDocsSnippetPays runs docs/clients.md's snippet against a real tekrar: a card that pays,
// one that is declined (where the snippet used to read a problem it had not filled, and
// panicked), and a server that never answers.
func TestDocsSnippetPays(t *testing.T) {
	t.Parallel()
	e := apptest.New(t)
	ctx := context.Background()
	if got := pay(ctx, e.URL, e.Secret, "tok_visa"); !strings.HasPrefix(got, "ord_") || !strings.Contains(got, " paid (replayed: false") {
		t.Errorf("tok_visa: %q, want a paid order", got)
	}
	if got := pay(ctx, e.URL, e.Secret, "tok_declined"); !strings.HasPrefix(got, "declined: order ord_") {
		t.Errorf("tok_declined: %q, want the declined order named", got)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 2 {
		t.Errorf("%d orders, want 2", n)
	}

	// Nothing listens there: every attempt fails to connect, and the outcome is unknown.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if got := pay(sctx, down, e.Secret, "tok_visa"); !strings.HasPrefix(got, "unresolved: keep key ") {
		t.Errorf("no server: %q, want unresolved", got)
	}
}
