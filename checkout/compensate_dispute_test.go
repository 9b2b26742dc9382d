package checkout

import (
	"context"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
)

// TestDisputedOrphanIsHeld: reconciliation meets a charge no order owns whose cardholder
// disputes it. Refunding it while the dispute is open could pay the cardholder twice (the
// refund, and the bank's decision for them), so its compensation is held, as a disputed
// order is, and nothing is refunded however often it is looked at; once the provider says
// the dispute is decided it goes on: won, the charge is refunded in full; lost, only what the
// bank did not give back is refunded, and with nothing left it settles as dispute_lost.
// Before, reconciliation refunded it at once.
func TestDisputedOrphanIsHeld(t *testing.T) {
	cases := []struct {
		name       string
		disputed   int64 // of 7000
		won        bool
		wantState  string
		wantRefund int64
	}{
		{"won", 7000, true, CompensationRefunded, 7000},
		{"lost in full", 7000, false, CompensationDisputeLost, 0},
		{"lost in part", 3000, false, CompensationRefunded, 4000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newActionEnv(t)
			ctx := context.Background()
			sb := e.p.Provider.(*psp.Sandbox)
			ch := e.orphanCharge("stray-disputed", "a charge of no order", 7000)
			dp, err := sb.OpenDispute(ctx, ch.ID, tc.disputed, "fraudulent")
			if err != nil {
				t.Fatal(err)
			}
			res := e.reconcile()
			if res.Orphans != 1 || res.CompensationsCreated != 1 || res.RefundsMade != 0 {
				t.Fatalf("reconcile: %+v, want one orphan owed and nothing refunded", res)
			}
			state := func() string {
				return e.str(`SELECT state FROM compensations WHERE charge_key = $1`, ch.Key)
			}
			for range 2 { // held, however often it is looked at
				if s := state(); s != CompensationDisputed {
					t.Fatalf("compensation %s, want %s", s, CompensationDisputed)
				}
				if n := e.count(`SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, ch.ID); n != 0 {
					t.Fatalf("%d refunds of a charge under an open dispute", n)
				}
				e.advance(time.Hour)
				if pass, err := e.s.compensateDue(ctx, 10, time.Minute); err != nil || pass.Held != 1 {
					t.Fatalf("compensateDue: %+v, %v; want it held", pass, err)
				}
			}
			if n := e.count(`SELECT count(*) FROM compensations WHERE charge_key = $1 AND settled_at IS NULL
				AND last_error LIKE '%' || $2 || '%'`, ch.Key, dp.ID); n != 1 {
				t.Error("the held compensation does not say which dispute holds it")
			}
			if _, err := sb.CloseDispute(ctx, dp.ID, tc.won); err != nil {
				t.Fatal(err)
			}
			e.advance(time.Hour)
			if _, err := e.s.compensateDue(ctx, 10, time.Minute); err != nil {
				t.Fatal(err)
			}
			if s := state(); s != tc.wantState {
				t.Fatalf("after the dispute: %s, want %s", s, tc.wantState)
			}
			if got := e.count(`SELECT coalesce(sum(amount), 0) FROM psp_refunds WHERE charge_id = $1`, ch.ID); got != tc.wantRefund {
				t.Errorf("refunded %d at the provider, want %d", got, tc.wantRefund)
			}
		})
	}
}
