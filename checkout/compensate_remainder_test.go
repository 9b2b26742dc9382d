package checkout

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
)

// oweOrphan writes the compensation reconciliation writes for an orphan charge, due now.
func (e *actionEnv) oweOrphan(ch psp.Charge) {
	e.t.Helper()
	if _, err := e.db.Exec(`
		INSERT INTO compensations (charge_key, reason, source, charge_id, next_attempt_at, watch_until, created_at)
		VALUES ($1, 'test', 'reconcile', $2, $3, $3::timestamptz + interval '1 day', $3)`, ch.Key, ch.ID, e.now); err != nil {
		e.t.Fatal(err)
	}
}

// settledCompensation is how a compensation settled.
type settledCompensation struct {
	State    string        `db:"state"`
	RefundID string        `db:"refund_id"`
	Amount   sql.NullInt64 `db:"amount"`
}

// TestCompensationRefundsWhatRemains: an operator refunded part or all of an orphan charge
// at the provider's dashboard before its compensation ran. The compensation refunds exactly
// what remains, once, under its derived key, even when the answer of its first refund is
// lost (the retry then finds less, or nothing, left) and two workers then take it at once;
// a charge refunded in full already settles with no refund. Refunding the charge's whole
// amount would be refused forever; recomputing the remainder before looking up the derived
// key would settle a made refund as "already refunded", or ask again with another amount.
func TestCompensationRefundsWhatRemains(t *testing.T) {
	cases := []struct {
		name       string
		dashboard  int64 // refunded at the dashboard first, of 7000
		lostFirst  bool  // the first attempt's refund is made but its answer lost
		wantState  string
		wantRefund int64 // the compensation's refund; 0 for none
	}{
		{"nothing refunded before", 0, true, CompensationRefunded, 7000},
		{"partly refunded, answer lost", 3000, true, CompensationRefunded, 4000},
		{"partly refunded, two workers", 2500, false, CompensationRefunded, 4500},
		{"wholly refunded", 7000, false, CompensationAlreadyRefunded, 0},
		{"wholly refunded in two refunds", 7000, true, CompensationAlreadyRefunded, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newActionEnv(t)
			ctx := context.Background()
			ch := e.orphanCharge(fmt.Sprintf("stray-%d", i), "a charge of no order", 7000)
			sb := e.p.Provider.(*psp.Sandbox)
			if tc.dashboard > 0 {
				part := tc.dashboard
				if tc.name == "wholly refunded in two refunds" {
					part = 1000
					if _, err := sb.DashboardRefund(ctx, ch.ID, tc.dashboard-part, "goodwill"); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := sb.DashboardRefund(ctx, ch.ID, part, "goodwill"); err != nil {
					t.Fatal(err)
				}
			}
			before := e.count(`SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, ch.ID)
			e.oweOrphan(ch)

			if tc.lostFirst {
				e.p.set("lost")
				res, _ := e.s.compensateDue(ctx, 10, time.Minute)
				e.p.set("")
				if tc.wantRefund > 0 && res.Retry != 1 {
					t.Fatalf("with the answer lost: %+v, want one retry", res)
				}
				e.advance(time.Hour) // the retry is due
			}
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					if _, err := e.s.compensateDue(ctx, 10, time.Minute); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()

			var got settledCompensation
			if err := e.db.Get(&got, `SELECT state, coalesce(refund_id, '') AS refund_id, amount
				FROM compensations WHERE charge_key = $1`, ch.Key); err != nil {
				t.Fatal(err)
			}
			if got.State != tc.wantState {
				t.Fatalf("compensation %+v, want %s", got, tc.wantState)
			}
			wantRefunds := before
			if tc.wantRefund > 0 {
				wantRefunds++
				var rf struct {
					ID     string `db:"id"`
					Amount int64  `db:"amount"`
				}
				if err := e.db.Get(&rf, `SELECT id, amount FROM psp_refunds WHERE key = $1`, compensationRefundKey(ch.Key)); err != nil {
					t.Fatalf("the compensation's refund under its derived key: %v", err)
				}
				if rf.Amount != tc.wantRefund || got.RefundID != rf.ID || got.Amount.Int64 != tc.wantRefund {
					t.Errorf("refund %+v, compensation %+v; want %d refunded by the compensation", rf, got, tc.wantRefund)
				}
			} else if got.RefundID != "" || got.Amount.Valid {
				t.Errorf("compensation %+v names a refund it did not make", got)
			}
			if n := e.count(`SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, ch.ID); n != wantRefunds {
				t.Errorf("%d refunds of the charge at the provider, want %d", n, wantRefunds)
			}
			if n := e.count(`SELECT refunded_amount FROM psp_charges WHERE id = $1`, ch.ID); n != 7000 {
				t.Errorf("the provider has refunded %d of the charge, want all 7000", n)
			}
		})
	}
}

// TestChargeReportsRefunded: every way of reading a charge says how much of it the provider
// has refunded, by any key; a remote client reads it through the provider API.
func TestChargeReportsRefunded(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	ch := e.orphanCharge("stray-read", "a charge of no order", 5000)
	sb := e.p.Provider.(*psp.Sandbox)
	if _, err := sb.DashboardRefund(ctx, ch.ID, 1200, "goodwill"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Refund(ctx, psp.RefundRequest{Key: "r-read", ChargeID: ch.ID, Amount: 300}); err != nil {
		t.Fatal(err)
	}
	got, err := sb.LookupCharge(ctx, ch.Key)
	if err != nil || got.Refunded != 1500 {
		t.Errorf("LookupCharge: refunded %d, %v; want 1500", got.Refunded, err)
	}
	srv := httptest.NewServer(psp.NewHandler(sb, nil))
	defer srv.Close()
	if got, err := psp.NewClient(srv.URL, srv.Client()).LookupCharge(ctx, ch.Key); err != nil || got.Refunded != 1500 {
		t.Errorf("LookupCharge over HTTP: refunded %d, %v; want 1500", got.Refunded, err)
	}
	if got, err := sb.CancelCharge(ctx, ch.Key); err != nil || got.Refunded != 1500 {
		t.Errorf("CancelCharge of a charged key: refunded %d, %v; want 1500", got.Refunded, err)
	}
	page, err := sb.ListCharges(ctx, psp.ChargeListQuery{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Minute)})
	if err != nil || len(page.Charges) != 1 || page.Charges[0].Refunded != 1500 {
		t.Errorf("ListCharges: %+v, %v; want one charge with 1500 refunded", page.Charges, err)
	}
}

// raceRefund is a provider at which, just before a worker's refund arrives, another worker
// makes the compensation's refund under the same derived key for another remainder (it
// computed it before a dashboard refund that came between the two look-ups).
type raceRefund struct {
	psp.Provider
	sb    *psp.Sandbox
	other int64
	once  sync.Once
}

func (p *raceRefund) Refund(ctx context.Context, req psp.RefundRequest) (psp.Refund, error) {
	var err error
	p.once.Do(func() {
		_, err = p.sb.Refund(ctx, psp.RefundRequest{Key: req.Key, ChargeID: req.ChargeID, Amount: p.other})
	})
	if err != nil {
		return psp.Refund{}, err
	}
	return p.Provider.Refund(ctx, req)
}

// TestCompensationTakesTheRefundAnotherWorkerMade: two workers computed different
// remainders; the one whose refund the provider refuses as a key reused with another amount
// settles with the refund the other made, not with an error retried forever.
func TestCompensationTakesTheRefundAnotherWorkerMade(t *testing.T) {
	e := newActionEnv(t)
	ctx := context.Background()
	ch := e.orphanCharge("stray-race", "a charge of no order", 7000)
	sb := e.p.Provider.(*psp.Sandbox)
	if _, err := sb.DashboardRefund(ctx, ch.ID, 1000, "goodwill"); err != nil {
		t.Fatal(err)
	}
	e.oweOrphan(ch)
	e.p.Provider = &raceRefund{Provider: sb, sb: sb, other: 5000}
	if res, err := e.s.compensateDue(ctx, 10, time.Minute); err != nil || res.Refunded != 1 {
		t.Fatalf("compensateDue: %+v, %v; want one refunded", res, err)
	}
	var got settledCompensation
	if err := e.db.Get(&got, `SELECT state, coalesce(refund_id, '') AS refund_id, amount
		FROM compensations WHERE charge_key = $1`, ch.Key); err != nil {
		t.Fatal(err)
	}
	var theirs string
	if err := e.db.Get(&theirs, `SELECT id FROM psp_refunds WHERE key = $1 AND amount = 5000`, compensationRefundKey(ch.Key)); err != nil {
		t.Fatal(err)
	}
	if got.State != CompensationRefunded || got.RefundID != theirs || got.Amount.Int64 != 5000 {
		t.Errorf("compensation %+v, want refunded with the other worker's refund %s of 5000", got, theirs)
	}
	if n := e.count(`SELECT count(*) FROM psp_refunds WHERE charge_id = $1`, ch.ID); n != 2 {
		t.Errorf("%d refunds of the charge, want the dashboard's and the compensation's", n)
	}
}

// Capability is the sandbox's row: the wrapper changes answers, not promises.
func (p *raceRefund) Capability() psp.Capability { return psp.PromisesOf(p.Provider) }
