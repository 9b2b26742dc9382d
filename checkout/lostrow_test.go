package checkout

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// The tests of a lost claim: tekrar's rows of a keyed request are gone (a restore from a
// backup taken before it, a failover under asynchronous replication) while the provider
// keeps what the request did. The client's retry, with the same key and body, must meet the
// provider's first charge or refund under the same provider key, and do nothing twice.

// loseOrder loses the rows of order as a restore or a failover would (dbtest.LoseOrder).
func (e *actionEnv) loseOrder(order string) {
	e.t.Helper()
	dbtest.LoseOrder(e.t, e.db, order)
}

// loseRefund deletes what tekrar holds of the refund made under key, its key row included,
// and puts its order back as it was before the refund was claimed (before is the order's
// status and refunded amount then); the provider keeps the refund.
func (e *actionEnv) loseRefund(key string, before orderMoney) {
	e.t.Helper()
	e.inTx(func(tx *sqlx.Tx) {
		var r struct {
			ID      int64 `db:"id"`
			OrderID int64 `db:"order_id"`
			KeyID   int64 `db:"key_id"`
		}
		if err := tx.Get(&r, `SELECT r.id, r.order_id, k.id AS key_id FROM refunds r
			JOIN idempotency_keys k ON k.refund_id = r.id WHERE k.client_id = $1 AND k.key = $2`, e.client.ID, key); err != nil {
			e.t.Fatalf("refund of key %s: %v", key, err)
		}
		for _, d := range []struct {
			q   string
			arg int64
		}{
			{`DELETE FROM key_events WHERE key_id = $1`, r.KeyID},
			{`DELETE FROM idempotency_keys WHERE id = $1`, r.KeyID},
			{`DELETE FROM outbox_events WHERE payload->>'refund' = (SELECT public_id::text FROM refunds WHERE id = $1)`, r.ID},
			{`DELETE FROM receipts WHERE refund_id = $1`, r.ID},
			{`DELETE FROM stock_movements WHERE refund_id = $1`, r.ID},
			{`DELETE FROM refunds WHERE id = $1`, r.ID},
		} {
			e.exec(tx, d.q, d.arg)
		}
		e.exec(tx, `UPDATE orders SET status = $2, refunded_amount = $3 WHERE id = $1`,
			r.OrderID, before.Status, before.Refunded)
	})
}

// orderMoney is an order's status and refunded amount.
type orderMoney struct {
	Status   string `db:"status"`
	Refunded int64  `db:"refunded_amount"`
	Captured int64  `db:"captured_amount"`
}

func (e *actionEnv) money(order string) orderMoney {
	e.t.Helper()
	var m orderMoney
	if err := e.db.Get(&m, `SELECT status, refunded_amount, captured_amount FROM orders WHERE public_id = $1`, order); err != nil {
		e.t.Fatalf("order %s: %v", order, err)
	}
	return m
}

func (e *actionEnv) inTx(f func(tx *sqlx.Tx)) {
	e.t.Helper()
	tx, err := e.db.Beginx()
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	f(tx)
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *actionEnv) exec(tx *sqlx.Tx, q string, args ...any) {
	e.t.Helper()
	if _, err := tx.Exec(q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

func TestALostOrderIsChargedOnce(t *testing.T) {
	e := newActionEnv(t)
	first, status := e.order("k-lost", psp.TokenVisa, 2500)
	if status != 201 {
		t.Fatalf("first order: %d, want 201", status)
	}
	charge := e.str(`SELECT id FROM psp_charges`)
	e.loseOrder(first)

	again, status := e.order("k-lost", psp.TokenVisa, 2500)
	if status != 201 {
		t.Fatalf("the retry after the rows were lost: %d, want 201", status)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges`); n != 1 {
		t.Fatalf("%d charges at the provider, want the first one only", n)
	}
	if m := e.money(again); m.Status != "paid" || m.Captured != 2500 {
		t.Errorf("the retry's order: %+v, want paid with 2500 captured", m)
	}
	if n := e.count(`SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id
		WHERE o.public_id = $1 AND p.provider_charge_id = $2`, again, charge); n != 1 {
		t.Errorf("%d payments of the retry's order with the first charge %s, want 1", n, charge)
	}
	e.reconcileFindsNothing()

	// The adopted charge is the order's: it refunds.
	if status := e.refund("r-1", again, 2500); status != 201 {
		t.Fatalf("refund of the retry's order: %d, want 201", status)
	}
	if n := e.count(`SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, charge); n != 1 {
		t.Errorf("%d refunds of the charge, want 1", n)
	}
	if m := e.money(again); m.Status != "refunded" || m.Refunded != 2500 {
		t.Errorf("after its refund: %+v, want refunded 2500", m)
	}

	// Another purchase under the key, once the rows are lost again, is another intent: it
	// is charged under another provider key, not answered with the first charge.
	e.loseOrder(again)
	if _, status := e.order("k-lost", psp.TokenVisa, 1200); status != 201 {
		t.Fatalf("another purchase under the lost key: %d, want 201", status)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges WHERE amount = 1200`); n != 1 {
		t.Errorf("%d charges of the other purchase, want 1", n)
	}
}

func TestALostRefundIsMadeOnce(t *testing.T) {
	e := newActionEnv(t)
	order, status := e.order("k-paid", psp.TokenVisa, 2500)
	if status != 201 {
		t.Fatalf("order: %d, want 201", status)
	}
	before := e.money(order)
	if status := e.refund("r-lost", order, 1000); status != 201 {
		t.Fatalf("first refund: %d, want 201", status)
	}
	refund := e.str(`SELECT id FROM psp_refunds`)
	e.loseRefund("r-lost", before)

	if status := e.refund("r-lost", order, 1000); status != 201 {
		t.Fatalf("the retry after the refund's rows were lost: %d, want 201", status)
	}
	if n := e.count(`SELECT count(*) FROM psp_refunds`); n != 1 {
		t.Fatalf("%d refunds at the provider, want the first one only", n)
	}
	if n := e.count(`SELECT count(*) FROM refunds WHERE provider_refund_id = $1 AND status = 'succeeded'`, refund); n != 1 {
		t.Errorf("%d refunds recorded with the provider's first refund %s, want 1", n, refund)
	}
	if m := e.money(order); m.Status != "partially_refunded" || m.Refunded != 1000 {
		t.Errorf("order after the retry: %+v, want partially_refunded 1000", m)
	}
	e.reconcileFindsNothing()
}

// TestALostPlanChargesEachInstallmentOnce: an order in installments whose rows were lost
// after its second installment was charged, claimed again by the client's retry: the
// retry's order meets the first charge, and its second installment, when the job charges it,
// meets the second one. The provider holds two charges, not four.
func TestALostPlanChargesEachInstallmentOnce(t *testing.T) {
	e := newInstallmentEnv(t, "UTC", utc("2027-01-10T09:00:00Z"))
	first, _ := e.plan("k-sofa", 900, 3)
	if charged := e.run("2027-02-10T09:00:00Z"); charged != 1 {
		t.Fatalf("the second installment's run: %d charged, want 1", charged)
	}
	e.loseOrder(first)

	e.now = utc("2027-02-11T09:00:00Z")
	again, id := e.plan("k-sofa", 900, 3)
	if again == first {
		t.Fatalf("the retry answered the lost order %s", first)
	}
	if charged := e.run("2027-03-11T09:00:00Z"); charged != 1 {
		t.Fatalf("the retry's second installment: %d charged, want 1", charged)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges`); n != 2 {
		t.Errorf("%d charges at the provider, want the first plan's two", n)
	}
	if got := e.count(`SELECT captured_amount FROM orders WHERE id = $1`, id); got != 600 {
		t.Errorf("the retry's order captured %d, want its two installments' 600", got)
	}
	e.now = utc("2027-03-11T09:00:00Z")
	e.reconcileFindsNothing()
}

// forgetKey removes key as the sweeper does once its tombstone ended: tekrar no longer
// knows the key, and the order or refund it made stays.
func (e *actionEnv) forgetKey(key string) {
	e.t.Helper()
	e.inTx(func(tx *sqlx.Tx) {
		e.exec(tx, `DELETE FROM key_events WHERE client_id = $1 AND key = $2`, e.client.ID, key)
		e.exec(tx, `DELETE FROM idempotency_keys WHERE client_id = $1 AND key = $2`, e.client.ID, key)
		e.exec(tx, `DELETE FROM key_tombstones WHERE client_id = $1 AND key = $2`, e.client.ID, key)
	})
}

// TestAForgottenKeyReusedIsANewIntent: a key tekrar forgot, reused by the client for the
// same request, is a new intent (docs/api.md): the provider, which still remembers the
// first request's provider key, is not asked under it, and the new order is charged (the
// new refund made) under the new row's own key, once.
func TestAForgottenKeyReusedIsANewIntent(t *testing.T) {
	e := newActionEnv(t)
	first, status := e.order("k-old", psp.TokenVisa, 2500)
	if status != 201 {
		t.Fatalf("first order: %d, want 201", status)
	}
	if status := e.refund("r-old", first, 1000); status != 201 {
		t.Fatalf("first refund: %d, want 201", status)
	}
	e.forgetKey("k-old")
	e.forgetKey("r-old")

	again, status := e.order("k-old", psp.TokenVisa, 2500)
	if status != 201 || again == first {
		t.Fatalf("the forgotten key reused: order %s, %d; want a new order, 201", again, status)
	}
	if m := e.money(again); m.Status != "paid" || m.Captured != 2500 {
		t.Errorf("the new order: %+v, want paid", m)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`); n != 2 {
		t.Errorf("%d charges at the provider, want the two orders'", n)
	}
	if status := e.refund("r-old", first, 1000); status != 201 {
		t.Fatalf("the forgotten refund key reused: %d, want 201", status)
	}
	if n := e.count(`SELECT count(*) FROM psp_refunds`); n != 2 {
		t.Errorf("%d refunds at the provider, want the two refunds'", n)
	}
	if m := e.money(first); m.Refunded != 2000 {
		t.Errorf("the first order: %+v, want 2000 refunded", m)
	}
	e.reconcileFindsNothing()
}
