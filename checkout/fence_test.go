package checkout

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
)

// openKey leaves key in progress with nobody working on it (the provider was unreachable:
// the worker gave its lease back) and returns the key row as its last owner holds it.
func (e *actionEnv) openKey(key string, refundOf string) *Key {
	e.t.Helper()
	e.p.set("down")
	defer e.p.set("")
	if refundOf == "" {
		if _, status := e.order(key, "tok_visa", 2500); status != http.StatusServiceUnavailable {
			e.t.Fatalf("order %s with the provider down: %d", key, status)
		}
	} else if status := e.refund(key, refundOf, 1000); status != http.StatusServiceUnavailable {
		e.t.Fatalf("refund %s with the provider down: %d", key, status)
	}
	var k Key
	if err := e.db.Get(&k, `SELECT `+keyed.Columns+` FROM idempotency_keys WHERE client_id = $1 AND key = $2`, e.client.ID, key); err != nil {
		e.t.Fatal(err)
	}
	if k.State != StateInProgress {
		e.t.Fatalf("key %s is %s, want in progress", key, k.State)
	}
	return &k
}

// keyRow is what a fenced write could change of a key.
type keyRow struct {
	State   string `db:"state"`
	Token   int64  `db:"lease_token"`
	Lease   string `db:"lease"`
	HasResp bool   `db:"has_resp"`
	Order   string `db:"order_status"`
}

func (e *actionEnv) keyRow(k *Key) keyRow {
	e.t.Helper()
	var r keyRow
	if err := e.db.Get(&r, `
		SELECT k.state, k.lease_token, coalesce(k.lease_expires_at::text, '') AS lease,
		       k.response_status IS NOT NULL AS has_resp, coalesce(o.status::text, '') AS order_status
		  FROM idempotency_keys k LEFT JOIN orders o ON o.id = k.order_id WHERE k.id = $1`, k.ID); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestOldOwnerWritesNothingAfterATakeover: a worker that stalled past its lease wakes after
// another took the key over, while the new owner is still at work (the key is in progress,
// so only the lease token tells the two apart). Every write the old owner can attempt must
// match nothing: complete the order or the refund, cancel the order (with or without a
// refund owed), hand the key to an operator, give its lease back, extend it, take it over
// again. Without the token condition in any one of them, this test fails.
func TestOldOwnerWritesNothingAfterATakeover(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	paidID, status := e.order("k-paid", "tok_visa", 5000)
	if status != http.StatusCreated {
		t.Fatalf("paid order: %d", status)
	}
	charge := psp.Charge{ID: "ch_fence", Amount: 2500, Currency: "TRY", Status: psp.StatusSucceeded, CardBrand: "visa", CardLast4: "4242"}
	resp := Response{Status: 201, Body: []byte(`{}`), Header: map[string]string{"Content-Type": "application/json"}}
	writes := []struct {
		name   string
		refund bool
		write  func(old *Key) error
	}{
		{"complete order", false, func(old *Key) error {
			return completeOrder(ctx, e.s.q, old, resp, e.now, "paid", 1, 2500, charge, "pk_fence")
		}},
		{"cancel order", false, func(old *Key) error {
			_, err := cancelOrder(ctx, e.s.q, old, e.now, nil)
			return err
		}},
		{"cancel order owing a refund", false, func(old *Key) error {
			_, err := cancelOrder(ctx, e.s.q, old, e.now, e.s.owe(old, e.now, "test"))
			return err
		}},
		{"complete refund", true, func(old *Key) error {
			return completeRefund(ctx, e.s.q, old, resp, e.now, "re_fence")
		}},
		{"mark attention", false, func(old *Key) error { return markAttention(ctx, e.s.q, old, "stalled worker") }},
		{"release key", false, func(old *Key) error {
			_, err := keyed.SetStateIfInProgress(ctx, e.s.q, keyed.Release(old, e.now))
			return err
		}},
		{"extend lease", false, func(old *Key) error {
			_, err := keyed.SetStateIfInProgress(ctx, e.s.q, keyed.Extend(old, e.now.Add(24*time.Hour)))
			return err
		}},
		{"take over again", false, func(old *Key) error {
			_, err := keyed.TakeOver(ctx, e.s.q, old, e.now.Add(24*time.Hour), e.s.cfg.Lease)
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			refundOf := ""
			if w.refund {
				refundOf = paidID
			}
			old := e.openKey("k-"+w.name, refundOf)
			taken, err := keyed.TakeOver(ctx, e.s.q, old, e.now, e.s.cfg.Lease)
			if err != nil {
				t.Fatalf("take over: %v", err)
			}
			before := e.keyRow(taken)
			events := e.count(`SELECT count(*) FROM outbox_events`)
			err = w.write(old)
			if err != nil && !errors.Is(err, keyed.ErrFenced) && !errors.Is(err, keyed.ErrNoKey) {
				t.Fatalf("old owner's write: %v", err)
			}
			if after := e.keyRow(taken); after != before {
				t.Errorf("the old owner changed the key taken from it:\nbefore %+v\nafter  %+v", before, after)
			}
			if n := e.count(`SELECT count(*) FROM payments WHERE provider_charge_id = 'ch_fence'`); n != 0 {
				t.Error("the old owner recorded a payment")
			}
			if n := e.count(`SELECT count(*) FROM compensations WHERE order_id = $1`, old.OrderID); n != 0 {
				t.Error("the old owner wrote a compensation")
			}
			if n := e.count(`SELECT count(*) FROM refunds WHERE provider_refund_id = 're_fence'`); n != 0 {
				t.Error("the old owner completed the refund")
			}
			if n := e.count(`SELECT count(*) FROM outbox_events`); n != events {
				t.Errorf("the old owner's write that matched nothing wrote %d events", n-events)
			}
			// The new owner still can: the fence is the token, not a lost key.
			if _, err := keyed.SetStateIfInProgress(ctx, e.s.q, keyed.Release(taken, e.now)); err != nil {
				t.Fatal(err)
			}
			if got := e.keyRow(taken); got.Lease == before.Lease {
				t.Error("the new owner could not write its own key")
			}
		})
	}
}

// TestCompletionIsOneTransaction makes the last write of each completing statement fail and
// checks that nothing of it stayed: the key is still in progress without a response, and
// its order (or refund) is unchanged. Split into two statements or transactions, the key
// would be completed while its order is not, and a retry would replay an answer that the
// database contradicts.
func TestCompletionIsOneTransaction(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	paidID, status := e.order("k-paid", "tok_visa", 5000)
	if status != http.StatusCreated {
		t.Fatalf("paid order: %d", status)
	}
	charge := psp.Charge{ID: "ch_atomic", Amount: 2500, Currency: "TRY", Status: psp.StatusSucceeded, CardBrand: "visa", CardLast4: "4242"}
	resp := Response{Status: 201, Body: []byte(`{}`), Header: map[string]string{"Content-Type": "application/json"}}
	cases := []struct {
		name, failOn string // the table whose write fails
		refund       bool
		complete     func(k *Key) error
	}{
		{"complete order", "payments", false, func(k *Key) error {
			return completeOrder(ctx, e.s.q, k, resp, e.now, "paid", 1, 2500, charge, "pk_atomic")
		}},
		{"cancel order owing a refund", "compensations", false, func(k *Key) error {
			_, err := cancelOrder(ctx, e.s.q, k, e.now, e.s.owe(k, e.now, "test"))
			return err
		}},
		{"cancel order", "orders", false, func(k *Key) error {
			_, err := cancelOrder(ctx, e.s.q, k, e.now, nil)
			return err
		}},
		{"complete refund", "orders", true, func(k *Key) error {
			return completeRefund(ctx, e.s.q, k, resp, e.now, "re_atomic")
		}},
		// The event is part of the change: a change whose event cannot be written is not made.
		{"complete order, its event refused", "outbox_events", false, func(k *Key) error {
			ch := charge
			ch.ID = "ch_atomic_event"
			return completeOrder(ctx, e.s.q, k, resp, e.now, "paid", 1, 2500, ch, "pk_atomic_event")
		}},
		{"complete refund, its event refused", "outbox_events", true, func(k *Key) error {
			return completeRefund(ctx, e.s.q, k, resp, e.now, "re_atomic_event")
		}},
		{"cancel order owing a refund, its event refused", "outbox_events", false, func(k *Key) error {
			_, err := cancelOrder(ctx, e.s.q, k, e.now, e.s.owe(k, e.now, "test"))
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refundOf := ""
			if c.refund {
				refundOf = paidID
			}
			k := e.openKey("k-"+c.name, refundOf)
			k, err := keyed.TakeOver(ctx, e.s.q, k, e.now, e.s.cfg.Lease)
			if err != nil {
				t.Fatal(err)
			}
			before := e.keyRow(k)
			refundBefore := e.str(`SELECT coalesce((SELECT status::text FROM refunds WHERE id = $1), '')`, k.RefundID)
			paidBefore := e.str(`SELECT status::text FROM orders WHERE public_id = $1`, paidID)
			events := e.count(`SELECT count(*) FROM outbox_events`)
			e.failWrites(c.failOn)
			if err := c.complete(k); err == nil {
				t.Fatal("the completing statement succeeded although a write of it failed")
			}
			e.allowWrites(c.failOn)
			if after := e.keyRow(k); after != before {
				t.Errorf("part of the completion stayed:\nbefore %+v\nafter  %+v", before, after)
			}
			if n := e.count(`SELECT count(*) FROM outbox_events`); n != events {
				t.Errorf("a completion that rolled back wrote %d events", n-events)
			}
			if got := e.str(`SELECT coalesce((SELECT status::text FROM refunds WHERE id = $1), '')`, k.RefundID); got != refundBefore {
				t.Errorf("refund %s, was %s", got, refundBefore)
			}
			if got := e.str(`SELECT status::text FROM orders WHERE public_id = $1`, paidID); got != paidBefore {
				t.Errorf("refunded order %s, was %s", got, paidBefore)
			}
			if n := e.count(`SELECT count(*) FROM payments WHERE order_id = $1`, k.OrderID) +
				e.count(`SELECT count(*) FROM compensations WHERE order_id = $1`, k.OrderID); n != 0 {
				t.Error("a payment or compensation stayed")
			}
			// And with the write allowed, the same statement completes.
			if err := c.complete(k); err != nil {
				t.Fatalf("complete: %v", err)
			}
			if got := e.keyRow(k); got.State != StateCompleted || !got.HasResp {
				t.Errorf("after the completion: %+v", got)
			}
		})
	}
}

// failWrites makes every insert or update of table fail, as a full disk or a lost
// connection would fail one statement in the middle.
func (e *actionEnv) failWrites(table string) {
	e.t.Helper()
	for _, s := range []string{
		`CREATE OR REPLACE FUNCTION test_fail_write() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN RAISE EXCEPTION 'test: write to % refused', TG_TABLE_NAME; END $$`,
		`CREATE TRIGGER test_fail_write BEFORE INSERT OR UPDATE ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION test_fail_write()`,
	} {
		if _, err := e.db.Exec(s); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *actionEnv) allowWrites(table string) {
	e.t.Helper()
	if _, err := e.db.Exec(`DROP TRIGGER test_fail_write ON ` + table); err != nil {
		e.t.Fatal(err)
	}
}

// TestOwedRefundIsMadeOnce drives a compensation whose charge did appear, through the
// failures that make a worker try again: the refund is made at the provider but its answer
// is lost, then two workers take the compensation at once. The refund's provider key is
// derived from the charge key, so the provider makes one refund whatever happens; a key
// that differed per attempt or per worker would refund the customer twice.
func TestOwedRefundIsMadeOnce(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	orderID, status := e.order("k-owed", "tok_visa", 7000)
	if status != http.StatusCreated {
		t.Fatalf("order: %d", status)
	}
	// As if tekrar had given up on this order at a provider that cannot fence, and the charge
	// appeared afterwards.
	if _, err := e.db.Exec(`
		WITH o AS (UPDATE orders SET status = 'canceled' WHERE public_id = $1 RETURNING id, client_id)
		INSERT INTO compensations (client_id, order_id, charge_key, reason, next_attempt_at, watch_until, created_at)
		SELECT o.client_id, o.id, p.provider_key, 'test', $2::timestamptz, $2::timestamptz + interval '1 day', $2::timestamptz
		  FROM o JOIN payments p ON p.order_id = o.id`, orderID, e.now); err != nil {
		t.Fatal(err)
	}
	e.p.set("lost")
	if res, _ := e.s.compensateDue(ctx, 10, time.Minute); res.Retry != 1 {
		t.Fatalf("with the answer lost: %+v, want one retry", res)
	}
	e.p.set("")
	if n := e.count(`SELECT count(*) FROM psp_refunds`); n != 1 {
		t.Fatalf("%d refunds at the provider after the lost answer, want 1", n)
	}
	e.advance(time.Hour) // the retry is due
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := e.s.compensateDue(ctx, 10, time.Minute); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.count(`SELECT count(*) FROM psp_refunds`); n != 1 {
		t.Errorf("%d refunds at the provider, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM compensations WHERE state = 'refunded' AND amount = 7000 AND refund_id IS NOT NULL`); n != 1 {
		t.Error("the compensation is not settled as refunded")
	}
}
