package settlement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/clients"
)

// Result is what one SettleDue pass did.
type Result struct {
	Clients     int // clients looked at
	Settled     int // settlements written
	Items       int // movements they counted on their own day
	Adjustments int // movements of earlier days they counted late
	Failed      int // clients whose pass stopped on an error
}

// String is the pass in one line, for a scheduler's log.
func (r Result) String() string {
	return fmt.Sprintf("settled %d days of %d clients: %d movements, %d adjustments; %d clients failed",
		r.Settled, r.Clients, r.Items, r.Adjustments, r.Failed)
}

// SettleDue settles, for every client, every business day that ended in the client's zone
// at least Grace before now and is not settled yet, from LookBack days before the last
// such day (and not before the client's first day) on, oldest first. It is safe to run at
// any time, as often as wanted, in as many processes as wanted: a settled day is skipped,
// and two passes settling one day at once write it once. One client's failure does not
// stop the others; the error names every failed client.
func (s *Settler) SettleDue(ctx context.Context, now time.Time) (summary string, err error) {
	res, err := s.settleDue(ctx, now)
	if s.cfg.Observe != nil {
		s.cfg.Observe(res, err)
	}
	if err == nil {
		s.logger.Info("settle", "clients", res.Clients, "settled", res.Settled, "items", res.Items,
			"adjustments", res.Adjustments)
	}
	return res.String(), err
}

func (s *Settler) settleDue(ctx context.Context, now time.Time) (Result, error) {
	var cs []dueClient
	if err := s.db.SelectContext(ctx, &cs, dueClientsSQL); err != nil {
		return Result{}, fmt.Errorf("settle due days: list clients: %w", err)
	}
	var res Result
	var errs []error
	for _, c := range cs {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		res.Clients++
		if err := s.settleClientDue(ctx, c, now, &res); err != nil {
			res.Failed++
			errs = append(errs, err)
			s.logger.Error("settle", "client_id", c.ID, "error", err)
		}
	}
	return res, errors.Join(errs...)
}

// settleClientDue settles the due days of one client.
func (s *Settler) settleClientDue(ctx context.Context, c dueClient, now time.Time, res *Result) error {
	loc, err := clients.Location(c.TimeZone)
	if err != nil {
		return fmt.Errorf("client %d: %w", c.ID, err)
	}
	last := dueDay(now, s.cfg.Grace, loc)
	first := last.AddDays(1 - s.cfg.LookBack)
	if born := calendar.Of(c.CreatedAt, loc); first.Before(born) {
		first = born
	}
	if last.Before(first) {
		return nil
	}
	var days []time.Time
	if err := s.db.SelectContext(ctx, &days, settledDaysSQL, c.ID, first.String()); err != nil {
		return fmt.Errorf("client %d: list settled days: %w", c.ID, err)
	}
	settled := make(map[calendar.Day]bool, len(days))
	for _, d := range days {
		settled[calendar.Of(d, time.UTC)] = true
	}
	for d := first; !last.Before(d); d = d.AddDays(1) {
		if settled[d] {
			continue
		}
		st, err := s.settle(ctx, c.ID, c.TimeZone, d, now)
		if err != nil {
			return fmt.Errorf("client %d: %w", c.ID, err)
		}
		if st.Created {
			res.Settled++
			res.Items += st.Items
			res.Adjustments += st.Adjusted
		}
	}
	return nil
}

// dueDay is the last day, in loc, that ended at least grace before now: the newest day a
// settlement pass at now settles.
func dueDay(now time.Time, grace time.Duration, loc *time.Location) calendar.Day {
	return calendar.Of(now.Add(-grace), loc).AddDays(-1)
}
