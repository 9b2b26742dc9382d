package installments

import (
	"context"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/psp"
)

// minuteKeys is the sandbox as a provider whose keys last a minute: what the charger reads
// of it (psp.PromisesOf), the sandbox's row with a one-minute window.
type minuteKeys struct{ psp.Provider }

func (p minuteKeys) Capability() psp.Capability {
	c := psp.PromisesOf(p.Provider)
	c.KeyWindow = time.Minute
	return c
}

// TestAnInstallmentIsNotSentAgainPastTheKeyWindow: an attempt whose run stalled after its
// claim is resumed by another run. Inside the provider's key window it is charged once;
// past it the run does not send it (the provider would make a repeat a new charge), and
// the installment goes to an operator with reason not_resent and nothing charged.
func TestAnInstallmentIsNotSentAgainPastTheKeyWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		after     time.Duration
		charges   int64
		status    string
		attention int
	}{
		{"inside the window", LeaseDefault + time.Second, 1, "paid", 0},
		{"past the window", 2 * time.Minute, 0, "attention", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newInstallmentEnv(t, "UTC", checkouttest.UTC("2027-01-15T09:00:00Z"))
			e.c = New(e.DB, minuteKeys{e.Sandbox}, Config{Now: e.Now}, nil)
			_, id := e.Plan("k-window", 600, 2)
			at := checkouttest.UTC("2027-02-15T00:00:00Z")
			ctx := context.Background()
			if _, err := e.c.claimInstallment(ctx, at); err != nil { // the run that stalls before it sends
				t.Fatal(err)
			}
			e.Advance(tc.after)
			taker, err := e.c.claimInstallment(ctx, at)
			if err != nil || !taker.Resumed {
				t.Fatalf("take over: %+v, %v", taker, err)
			}
			var res Result
			if err := e.c.chargeInstallment(ctx, taker, at, &res); err != nil {
				t.Fatal(err)
			}
			if res.Attention != tc.attention {
				t.Errorf("the run recorded %+v, want %d for an operator", res, tc.attention)
			}
			if got := e.Text(`SELECT status FROM installments WHERE order_id = $1 AND n = 2`, id); got != tc.status {
				t.Errorf("installment 2 is %s, want %s", got, tc.status)
			}
			if n := e.Count(`SELECT count(*) FROM psp_charges WHERE description = $1`, checkout.InstallmentDescription(e.publicID(id), 2)); n != tc.charges {
				t.Errorf("the provider made %d charges of installment 2, want %d", n, tc.charges)
			}
			if tc.attention == 1 {
				if n := e.Count(`SELECT count(*) FROM outbox_events WHERE type = 'installment.needs_attention' AND payload->>'reason' = $1`, attentionNotResent); n != 1 {
					t.Errorf("%d installment.needs_attention events with reason %s, want 1", n, attentionNotResent)
				}
			}
			e.ledgerAgrees(id)
		})
	}
}
