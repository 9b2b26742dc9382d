package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/config"
)

// The sandbox's dashboard from the command line: `tekrar psp refund|dispute|close-dispute`
// ask a running `tekrar psp` to do what a merchant does in its dashboard, so that a test or
// a demo can make the provider's own events (a refund, a dispute, its outcome) happen.
// They are verbs under `tekrar psp`, which itself still serves: one level, one verb per
// dashboard route.

// pspDefaultAddr is where a bare `tekrar psp` listens; pspDefaultURL reaches it.
const (
	pspDefaultAddr = "127.0.0.1:8099"
	pspDefaultURL  = "http://" + pspDefaultAddr
)

// dashboardCallTimeout bounds one dashboard request; the sandbox answers them at once.
const dashboardCallTimeout = 30 * time.Second

// dashboardSettings are the flags every dashboard command reads.
type dashboardSettings struct {
	url    string
	asJSON bool
}

func (d *dashboardSettings) bind(s *config.Set) {
	s.URL(&d.url, "psp-url", "TEKRAR_PSP_URL", pspDefaultURL, "base URL of the sandbox provider (a 'tekrar psp' process)")
	s.Bool(&d.asJSON, "json", "TEKRAR_PSP_JSON", "false", "print the provider's answer as JSON instead of one line")
}

// call runs one dashboard action against the provider and prints its answer: one line, or
// the JSON object with --json. A problem the provider answers is the command's error.
func (d *dashboardSettings) call(ctx context.Context, e env, action func(context.Context, psp.Dashboard) (any, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, dashboardCallTimeout)
	defer cancel()
	v, line, err := action(ctx, psp.NewClient(d.url, nil))
	if err != nil {
		return err
	}
	if !d.asJSON {
		fmt.Fprintln(e.stdout, line)
		return nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	fmt.Fprintln(e.stdout, string(out))
	return nil
}

// amountSetting binds --amount, in the charge's minor units.
func amountSetting(s *config.Set, p *int, what string) {
	s.Int(p, "amount", "TEKRAR_PSP_AMOUNT", "0", what+", in the charge's minor units (required)", 0, math.MaxInt)
}

func requireAmount(amount int) error {
	if amount <= 0 {
		return usageError("--amount is required: a positive amount in the charge's minor units")
	}
	return nil
}

// pspRefundCmd: `tekrar psp refund CHARGE_ID --amount N` refunds part or all of a charge
// from the dashboard, under a key of the dashboard's own.
func pspRefundCmd(e env) *cobra.Command {
	var d dashboardSettings
	var amount int
	var reason string
	return command(e, "refund CHARGE_ID", "refund a charge from the sandbox provider's dashboard", exactArgs(1),
		func(s *config.Set) {
			d.bind(s)
			amountSetting(s, &amount, "how much to refund")
			s.String(&reason, "reason", "TEKRAR_PSP_REASON", "", "why, as the provider records it")
		},
		func(ctx context.Context, args []string) error {
			if err := requireAmount(amount); err != nil {
				return err
			}
			return d.call(ctx, e, func(ctx context.Context, p psp.Dashboard) (any, string, error) {
				rf, err := p.DashboardRefund(ctx, args[0], int64(amount), reason)
				return rf, fmt.Sprintf("refund %s: %d %s of %s", rf.ID, rf.Amount, rf.Currency, rf.ChargeID), err
			})
		})
}

// pspDisputeCmd: `tekrar psp dispute CHARGE_ID --amount N` opens a dispute (a chargeback)
// on a succeeded charge.
func pspDisputeCmd(e env) *cobra.Command {
	var d dashboardSettings
	var amount int
	var reason string
	return command(e, "dispute CHARGE_ID", "open a dispute on a charge at the sandbox provider", exactArgs(1),
		func(s *config.Set) {
			d.bind(s)
			amountSetting(s, &amount, "the disputed amount")
			s.String(&reason, "reason", "TEKRAR_PSP_REASON", "", "the cardholder's reason (fraudulent, product_not_received, ...)")
		},
		func(ctx context.Context, args []string) error {
			if err := requireAmount(amount); err != nil {
				return err
			}
			return d.call(ctx, e, func(ctx context.Context, p psp.Dashboard) (any, string, error) {
				dp, err := p.OpenDispute(ctx, args[0], int64(amount), reason)
				return dp, disputeLine(dp), err
			})
		})
}

// pspCloseDisputeCmd: `tekrar psp close-dispute DISPUTE_ID --outcome won|lost` decides an
// open dispute.
func pspCloseDisputeCmd(e env) *cobra.Command {
	var d dashboardSettings
	var outcome string
	return command(e, "close-dispute DISPUTE_ID", "decide an open dispute at the sandbox provider", exactArgs(1),
		func(s *config.Set) {
			d.bind(s)
			s.String(&outcome, "outcome", "TEKRAR_PSP_OUTCOME", "", "won (the merchant keeps the money) or lost (it goes back to the cardholder); required")
		},
		func(ctx context.Context, args []string) error {
			if outcome != psp.DisputeWon && outcome != psp.DisputeLost {
				return usageError("--outcome %q: want won or lost", outcome)
			}
			return d.call(ctx, e, func(ctx context.Context, p psp.Dashboard) (any, string, error) {
				dp, err := p.CloseDispute(ctx, args[0], outcome == psp.DisputeWon)
				return dp, disputeLine(dp), err
			})
		})
}

func disputeLine(dp psp.Dispute) string {
	return fmt.Sprintf("dispute %s %s: %d of %s", dp.ID, dp.Status, dp.Amount, dp.ChargeID)
}
