package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/money"
	"github.com/tekrar/tekrar/checkout/settlement"
	"github.com/tekrar/tekrar/internal/app"
	"github.com/tekrar/tekrar/internal/config"
)

// settleCmd settles one business day by hand, or reruns it: a day settled already is
// printed as it was written, with the movements that came late since and wait for the next
// settlement. It takes no lock of its own: two at once, or with the schedule, write each
// day once (docs/settlement.md).
func settleCmd(e env) *cobra.Command {
	var cfg config.Server
	var date string
	var client int
	return command(e, "settle", "settle a business day (or rerun its settlement) for one client or all", exactArgs(0),
		func(s *config.Set) { config.BindSettle(s, &cfg, &date, &client) },
		func(ctx context.Context, _ []string) error { return settle(ctx, e, cfg, date, int64(client)) })
}

func settle(ctx context.Context, e env, cfg config.Server, date string, client int64) error {
	if date == "" {
		return usageError("--date is required: the business day to settle, YYYY-MM-DD")
	}
	day, err := calendar.Parse(date)
	if err != nil {
		return usageError("--date: %v", err)
	}
	pool, err := connect(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	s := settlement.New(pool, settlement.Config{}, app.NewLogger(cfg, e.stderr))
	ids := []int64{client}
	if client == 0 {
		if ids, err = s.Clients(ctx); err != nil {
			return err
		}
	}
	var errs []error
	for _, id := range ids {
		st, err := s.Settle(ctx, id, day)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintln(e.stdout, settlementLine(st))
	}
	return errors.Join(errs...)
}

// settlementLine is a settlement in one line.
func settlementLine(st settlement.Settlement) string {
	var b strings.Builder
	fmt.Fprintf(&b, "client %d %s (%s): settlement %d ", st.ClientID, st.Day, st.TimeZone, st.ID)
	if st.Created {
		b.WriteString("written now")
	} else {
		fmt.Fprintf(&b, "written at %s, unchanged", st.SettledAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "; %d movements, %d adjustments", st.Items, st.Adjusted)
	for _, t := range st.Totals {
		fmt.Fprintf(&b, "; %s captured %s (%d), refunded %s (%d), disputed %s (%d), compensated %s (%d)", t.Currency,
			money.Format(t.CapturedAmount, t.Currency), t.CapturedCount, money.Format(t.RefundedAmount, t.Currency), t.RefundedCount,
			money.Format(t.DisputedAmount, t.Currency), t.DisputedCount, money.Format(t.CompensatedAmount, t.Currency), t.CompensatedCount)
	}
	if st.Waiting > 0 {
		fmt.Fprintf(&b, "; %d late movements wait for the next settlement", st.Waiting)
	}
	return b.String()
}
