package reconcile

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/psp"
)

// TestASecondChargeUnderAPaymentsKeyIsRefunded: at a provider without keys a paid order's
// charge request arrives a second time (a frozen worker's) and is charged again under the
// same key. Reconciliation owes the second charge back as an orphan of the order and its
// compensation refunds that charge, found by the order's reference and its id; the charge
// the payment names is left alone, and a second run owes nothing more.
func TestASecondChargeUnderAPaymentsKeyIsRefunded(t *testing.T) {
	e := &actionEnv{checkouttest.New(t, checkouttest.Options{Switch: true, Sandbox: psp.SandboxOptions{KeyLess: true}})}
	ctx := context.Background()
	order, status := e.Order("k-twice", psp.TokenVisa, 2500)
	if status != http.StatusCreated {
		t.Fatalf("order: %d", status)
	}
	var pay struct {
		Key    string `db:"provider_key"`
		Charge string `db:"provider_charge_id"`
	}
	if err := e.DB.Get(&pay, `SELECT p.provider_key, p.provider_charge_id FROM payments p JOIN orders o ON o.id = p.order_id
		 WHERE o.public_id = $1`, order); err != nil {
		t.Fatal(err)
	}
	second, err := e.Sandbox.Charge(ctx, psp.ChargeRequest{Key: pay.Key, Amount: 2500, Currency: "TRY",
		CardToken: psp.TokenVisa, Description: checkout.OrderReference(order)})
	if err != nil || second.ID == pay.Charge {
		t.Fatalf("the second charge: %+v, %v", second, err)
	}
	e.Advance(time.Second)
	res := e.reconcile()
	if res.Orphans != 1 || res.CompensationsCreated != 1 || res.RefundsMade != 1 {
		t.Errorf("reconcile: %+v; want the second charge owed and refunded", res)
	}
	refunded := func(chargeID string) int64 {
		return e.Count(`SELECT coalesce(sum(amount), 0) FROM psp_refunds WHERE charge_id = $1`, chargeID)
	}
	if refunded(second.ID) != 2500 || refunded(pay.Charge) != 0 {
		t.Errorf("refunded %d of the second charge and %d of the payment's; want 2500 and 0", refunded(second.ID), refunded(pay.Charge))
	}
	if got := e.Text(`SELECT state FROM compensations WHERE charge_id = $1`, second.ID); got != checkout.CompensationRefunded {
		t.Errorf("the compensation is %s, want %s", got, checkout.CompensationRefunded)
	}
	if got := e.Text(`SELECT status FROM orders WHERE public_id = $1`, order); got != checkout.StatusPaid {
		t.Errorf("the order is %s, want still paid", got)
	}
	if again := e.reconcile(); again.CompensationsCreated != 0 || again.RefundsMade != 0 {
		t.Errorf("a second run: %+v; want nothing more owed", again)
	}
}
