package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tekrar/tekrar/checkout/sdk"
)

// pending is how a merchant's service might keep a purchase it has not finished: the key is
// stored with it before the first attempt, so that a restart retries under the same key.
type pending struct {
	Key   string
	Order sdk.OrderInput
}

// A purchase: make the key once, keep it with the purchase, and call CreateOrder with the
// same key and input until it answers, across restarts too.
func Example() {
	c := sdk.New("https://pay.example.com", os.Getenv("TEKRAR_SECRET"))
	p := pending{Key: sdk.NewKey(), Order: sdk.OrderInput{
		Currency: "TRY", Amount: 9000,
		Items:   []sdk.Item{{SKU: "LATTE", Name: "Latte", Quantity: 2, UnitAmount: 4500}},
		Payment: sdk.Payment{CardToken: "tok_visa"},
	}}
	// ... store p (a database row, a queue message) before the first attempt ...

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	order, k, err := c.CreateOrder(ctx, p.Key, p.Order)
	var problem *sdk.Error
	var unknown *sdk.UnknownOutcome
	switch {
	case err == nil:
		fmt.Println(order.ID, order.Status, "replayed:", k.Replayed, "key honoured until", k.Expires)
	case errors.Is(err, sdk.ErrPaymentDeclined):
		// Final for this key. Another card is another attempt: a new key is safe.
		errors.As(err, &problem)
		fmt.Println("declined; order", problem.OrderID, "ask for another card")
	case errors.As(err, &problem) && problem.SafeNewKey:
		// Nothing was charged: fix the request (problem.Fields) and send it again; the key
		// may be kept or replaced.
		fmt.Println("refused:", problem.Code, problem.Fields)
	case errors.As(err, &problem), errors.As(err, &unknown), ctx.Err() != nil:
		// The card may have been charged: keep p and its key, and retry later with both.
		log.Printf("payment %s unresolved, will retry: %v", p.Key, err)
	default:
		log.Print(err)
	}
}

// A refund of part of an order, with a key of its own.
func ExampleClient_CreateRefund() {
	c := sdk.New("https://pay.example.com", os.Getenv("TEKRAR_SECRET"))
	key := sdk.NewKey() // stored with the refund the merchant decided on
	refund, _, err := c.CreateRefund(context.Background(), key, "ord_3f9c2a7e5b1d4c8e9a0b6d2f4e8c1a57",
		sdk.RefundInput{Amount: 4500, Reason: "one latte spilt"})
	if errors.Is(err, sdk.ErrRefundExceedsCaptured) {
		fmt.Println("already refunded")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(refund.ID, refund.Status)
}

// Tests and tools can see the waits the policy chooses instead of waiting for them.
func ExampleWithSleep() {
	var waits []time.Duration
	c := sdk.New("http://127.0.0.1:8080", "secret",
		sdk.WithPolicy(sdk.Policy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}),
		sdk.WithSleep(func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			return ctx.Err()
		}))
	_ = c
}
