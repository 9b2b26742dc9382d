package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/sdk"
)

// TestKeyedAnswersSayReplayAndExpiry: the first answer is not a replay, the second is, and
// both say until when the key is honoured, as tekrar stored it.
func TestKeyedAnswersSayReplayAndExpiry(t *testing.T) {
	r := newRig(t, policy(3))
	ctx := context.Background()
	first, k1, err := r.c.CreateOrder(ctx, "", order(9000, "tok_visa"))
	if err != nil {
		t.Fatal(err)
	}
	again, k2, err := r.c.CreateOrder(ctx, k1.Key, order(9000, "tok_visa"))
	if err != nil {
		t.Fatal(err)
	}
	if k1.Key == "" || k1.Replayed || !k2.Replayed || k2.Key != k1.Key || again.ID != first.ID {
		t.Fatalf("first %+v, again %+v (orders %s, %s)", k1, k2, first.ID, again.ID)
	}
	var stored time.Time
	if err := r.e.DB.Get(&stored, `SELECT expires_at FROM idempotency_keys WHERE key = $1`, k1.Key); err != nil {
		t.Fatal(err)
	}
	for _, k := range []sdk.Keyed{k1, k2} {
		if !k.Expires.Equal(stored.Truncate(time.Second)) {
			t.Errorf("Expires %v, stored %v", k.Expires, stored)
		}
	}
	charged(t, r.e, 1, 1)
}

// TestResources: the reads, refunds, products and carts a merchant's service uses, and an
// order of a cart, each through the client; not-found is a typed error, not retried.
func TestResources(t *testing.T) {
	r := newRig(t, policy(3))
	ctx := context.Background()

	p, err := r.c.PutProduct(ctx, "LATTE", sdk.ProductInput{Name: "Latte", Price: 4500, Currency: "TRY", Stock: 10})
	if err != nil || p.SKU != "LATTE" || p.Stock != 10 || p.Version == 0 {
		t.Fatalf("put product: %+v %v", p, err)
	}
	if got, err := r.c.GetProduct(ctx, "LATTE"); err != nil || got.Version != p.Version || got.Price != 4500 {
		t.Fatalf("get product: %+v %v", got, err)
	}
	line := sdk.Item{SKU: "LATTE", Name: "Latte", Quantity: 2, UnitAmount: 4500, FromStock: true}
	cart, err := r.c.PutCart(ctx, "table-4", []sdk.Item{line})
	if err != nil || cart.ID != "table-4" || cart.Amount != 9000 {
		t.Fatalf("put cart: %+v %v", cart, err)
	}
	if got, err := r.c.GetCart(ctx, "table-4"); err != nil || got.Version != cart.Version || len(got.Items) != 1 {
		t.Fatalf("get cart: %+v %v", got, err)
	}
	o, _, err := r.c.CreateOrder(ctx, "", sdk.OrderInput{Currency: "TRY", CartID: "table-4", Amount: 9000,
		Payment: sdk.Payment{CardToken: "tok_visa"}})
	if err != nil || o.Status != "paid" {
		t.Fatalf("order of the cart: %+v %v", o, err)
	}
	if got, err := r.c.GetProduct(ctx, "LATTE"); err != nil || got.Stock != 8 {
		t.Fatalf("stock after the order: %+v %v", got, err)
	}

	rf, k, err := r.c.CreateRefund(ctx, "", o.ID, sdk.RefundInput{Amount: 4500, Reason: "spilt", Restock: true,
		RestockItems: []sdk.RestockItem{{SKU: "LATTE", Quantity: 1}}})
	if err != nil || rf.OrderID != o.ID || rf.Amount != 4500 || k.Replayed {
		t.Fatalf("refund: %+v %+v %v", rf, k, err)
	}
	if got, err := r.c.GetRefund(ctx, o.ID, rf.ID); err != nil || got.ID != rf.ID {
		t.Fatalf("get refund: %+v %v", got, err)
	}
	if got, err := r.c.GetOrder(ctx, o.ID); err != nil || got.RefundedAmount != 4500 || got.Status != "partially_refunded" {
		t.Fatalf("order after the refund: %+v %v", got, err)
	}
	_, _, err = r.c.CreateRefund(ctx, "", o.ID, sdk.RefundInput{Amount: 9000})
	if !errors.Is(err, sdk.ErrRefundExceedsCaptured) {
		t.Fatalf("over-refund: %v", err)
	}

	ks, err := r.c.GetKey(ctx, k.Key)
	if err != nil || ks.State != "completed" || ks.RefundID != rf.ID || ks.Expired {
		t.Fatalf("key of the refund: %+v %v", ks, err)
	}

	if _, err := r.c.GetKey(ctx, "never/sent"); !errors.Is(err, sdk.ErrIdempotencyKeyNotFound) {
		t.Fatalf("a key never sent: %v", err)
	}

	before := len(r.tr.attempts())
	for _, err := range []error{
		func() error { _, err := r.c.GetOrder(ctx, "ord_"+"00000000000000000000000000000000"); return err }(),
		func() error { _, err := r.c.GetProduct(ctx, "NOPE"); return err }(),
		func() error { _, err := r.c.GetCart(ctx, "nope"); return err }(),
		func() error { _, err := r.c.GetKey(ctx, "never/sent"); return err }(),
	} {
		var p *sdk.Error
		if !errors.As(err, &p) || p.Status != 404 || p.Attempts != 1 {
			t.Errorf("not found: %v", err)
		}
	}
	if n := len(r.tr.attempts()) - before; n != 4 {
		t.Errorf("%d requests for 4 reads of nothing", n)
	}
	charged(t, r.e, 1, 1)
}

// TestOneKeyManyCallers: one intent sent at once from many goroutines through one client (a
// pay button tapped again and again, a job run twice) is one order and one charge; with
// Prefer: wait every caller gets that order.
func TestOneKeyManyCallers(t *testing.T) {
	p := policy(5)
	p.Wait = 8 * time.Second
	r := newRig(t, p)
	key := sdk.NewKey()
	const n = 30
	ids := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o, _, err := r.c.CreateOrder(context.Background(), key, order(9000, "tok_visa"))
			if err == nil {
				ids[i] = o.ID
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("caller %d: order %q, error %v; caller 0: %q", i, ids[i], errs[i], ids[0])
		}
	}
	charged(t, r.e, 1, 1)
}

// TestReadsRetriedAfterLostAnswers: a GET or a whole-resource PUT whose answer is lost is
// sent again as it is.
func TestReadsRetriedAfterLostAnswers(t *testing.T) {
	p := policy(3)
	p.AttemptTimeout = time.Second // the late answer is held past it
	r := newRig(t, p)
	ctx := context.Background()
	r.tr.on(1, lose)
	r.tr.on(3, late)
	if _, err := r.c.PutProduct(ctx, "TEA", sdk.ProductInput{Name: "Tea", Price: 3000, Currency: "TRY", Stock: 5}); err != nil {
		t.Fatal(err)
	}
	got, err := r.c.GetProduct(ctx, "TEA")
	if err != nil || got.Stock != 5 {
		t.Fatalf("get: %+v %v", got, err)
	}
	sent := r.tr.attempts()
	if len(sent) != 4 || !bytes.Equal(sent[0].body, sent[1].body) || sent[0].key != "" {
		t.Fatalf("%d requests, want 2 PUTs (the same body, no key) and 2 GETs", len(sent))
	}
}

// TestInstallmentsOnASavedCard: an order in installments on a card the customer saved at
// the provider, its plan as tekrar answers it, and the same plan on a replay and a read.
func TestInstallmentsOnASavedCard(t *testing.T) {
	r := newRig(t, policy(3))
	ctx := context.Background()
	pm, err := psp.NewSandbox(r.e.DB, psp.SandboxOptions{}).SavePaymentMethod(ctx, r.e.ProviderCustomer(t, r.e.ClientID, "cus_1"), psp.TokenVisa)
	if err != nil {
		t.Fatal(err)
	}
	in := sdk.OrderInput{Currency: "TRY", Amount: 1000, Installments: 3,
		Items:   []sdk.Item{{SKU: "SOFA", Name: "Sofa", Quantity: 1, UnitAmount: 1000}},
		Payment: sdk.Payment{Customer: "cus_1", PaymentMethod: pm.ID}}
	plan := func(o *sdk.Order) string {
		var s []string
		for _, i := range o.Installments {
			s = append(s, fmt.Sprintf("%d %d %s", i.N, i.Amount, i.Status))
		}
		return strings.Join(s, ", ")
	}
	const want = "1 334 paid, 2 333 scheduled, 3 333 scheduled"
	first, k, err := r.c.CreateOrder(ctx, "", in)
	if err != nil || first.Status != "paid" || plan(first) != want {
		t.Fatalf("order: %+v (plan %s), %v; want paid with %s", first, plan(first), err, want)
	}
	again, k2, err := r.c.CreateOrder(ctx, k.Key, in)
	if err != nil || !k2.Replayed || again.ID != first.ID || plan(again) != want {
		t.Fatalf("replay: %+v %+v %v", again, k2, err)
	}
	read, err := r.c.GetOrder(ctx, first.ID)
	if err != nil || plan(read) != want {
		t.Fatalf("read: %+v %v", read, err)
	}
	charged(t, r.e, 1, 1)
}
