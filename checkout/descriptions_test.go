package checkout

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/checkout/psp/psptest"
)

// lostCharge pays amount under key with the provider's answer lost: the charge stands at
// the provider, the order is still pending. It returns the order's public and internal ids
// and the charge as the sandbox's ledger holds it (found by its amount: one per test).
func (e *actionEnv) lostCharge(key string, amount int64) (public string, id int64, ch psp.Charge) {
	e.t.Helper()
	e.p.set("lost")
	public, status := e.order(key, psp.TokenVisa, amount)
	e.p.set("")
	if status == http.StatusCreated {
		e.t.Fatalf("order %s with its answer lost: %d", key, status)
	}
	id = e.count(`SELECT id FROM orders WHERE public_id = $1`, public)
	if got := e.str(`SELECT status FROM orders WHERE id = $1`, id); got == "paid" {
		e.t.Fatalf("order %s is paid with its answer lost", key)
	}
	if err := e.db.Get(&ch, `SELECT id, key, amount, currency, status, description FROM psp_charges WHERE amount = $1`, amount); err != nil {
		e.t.Fatalf("the charge of order %s: %v", key, err)
	}
	return public, id, ch
}

// chargeSucceeded hands the inbox the provider's charge.succeeded of ch, described as
// description.
func (e *actionEnv) chargeSucceeded(ch psp.Charge, description string) {
	e.t.Helper()
	pe := psp.Event{ID: "evt_" + ch.ID, Type: psp.EventChargeSucceeded, Created: e.now,
		Data: psp.EventData{ChargeID: ch.ID, ChargeKey: ch.Key, Description: description, Sequence: 1,
			Amount: ch.Amount, Currency: ch.Currency, Status: psp.StatusSucceeded}}
	body, _ := json.Marshal(pe)
	if _, err := e.receiveProviderEvent(body, pe); err != nil {
		e.t.Fatalf("receive %s: %v", pe.Type, err)
	}
}

// TestAChargeNamesItsOrderByPublicID: the provider is told the order's public id, never its
// internal id, which after a failover or a restore may be another order's; a provider event
// finds the order by it, and by the old form ("order <internal id>") only when the charge
// was made under that order's key.
func TestAChargeNamesItsOrderByPublicID(t *testing.T) {
	t.Run("the description names the public id", func(t *testing.T) {
		e := newActionEnv(t)
		public, id, ch := e.lostCharge("k-1", 1100)
		if want := "order " + public; ch.Description != want {
			t.Fatalf("the charge is described %q, want %q (not %q)", ch.Description, want, fmt.Sprint("order ", id))
		}
		e.chargeSucceeded(ch, ch.Description)
		if got := e.str(`SELECT status FROM orders WHERE id = $1`, id); got != "paid" {
			t.Errorf("the order found by its public id is %s, want paid", got)
		}
	})
	t.Run("an old description of the right order", func(t *testing.T) {
		e := newActionEnv(t)
		_, id, ch := e.lostCharge("k-1", 1200)
		e.chargeSucceeded(ch, fmt.Sprint("order ", id))
		if got := e.str(`SELECT status FROM orders WHERE id = $1`, id); got != "paid" {
			t.Errorf("the order its charge's key confirms is %s, want paid", got)
		}
	})
	t.Run("an old description whose id is another order's now", func(t *testing.T) {
		e := newActionEnv(t)
		// Order id holds a lost answer's charge of its own; a charge of an order lost in a
		// failover names the same internal id, under the lost order's key.
		_, id, _ := e.lostCharge("k-1", 1300)
		stray := psptest.Charge(t, e.p, "tekrar_ch_00112233445566778899aabbccddeeff", fmt.Sprint("order ", id), 1300)
		e.chargeSucceeded(stray, stray.Description)
		if got := e.str(`SELECT status FROM orders WHERE id = $1`, id); got == "paid" {
			t.Errorf("another order's charge, described by the order's internal id, paid it")
		}
		if n := e.count(`SELECT count(*) FROM payments WHERE provider_charge_id = $1`, stray.ID); n != 0 {
			t.Errorf("the stray charge is on %d payments", n)
		}
	})
}
