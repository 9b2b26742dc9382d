// Package calendar is the business day: a client's date, and the one rule of where it begins
// in the client's time zone, which settlement, installments, the console and `tekrar settle`
// share. It reads and writes no table.
package calendar

import (
	"fmt"
	"time"
)

// Day is a business day: a date on a client's calendar, which becomes a window of instants
// only in the client's time zone. It is a value: comparable, usable as a map key. Settlement
// (a day's own movements and its late adjustments) and installments (a due date and the
// instant it is due) use it, and so one rule for where a day begins:
//
// A day begins at the first instant its date is on the zone's clocks, and ends where the
// next day begins. That is its midnight; where the clocks skip midnight (America/Havana on
// 2026-03-08 goes from 00:00 to 01:00), the instant the gap ends (01:00 local); where they
// repeat it (America/Havana on 2026-11-01 goes from 01:00 back to 00:00), the first 00:00.
// time.Date alone does not say this: it moves a midnight that does not exist by the zone's
// offset, to 23:00 of the day before in Havana but to 01:00 in Beirut, and does not promise
// which of two midnights it picks.
type Day struct {
	Year  int
	Month time.Month
	Day   int
}

// Parse reads a day written YYYY-MM-DD; a date that does not exist (2027-02-29,
// 2026-04-31) is refused.
func Parse(s string) (Day, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Day{}, fmt.Errorf("%q is not a date written YYYY-MM-DD", s)
	}
	return dateIn(t, time.UTC), nil
}

// Of is the business day instant t falls on in loc: the day whose window holds t.
func Of(t time.Time, loc *time.Location) Day {
	d := dateIn(t, loc)
	// The date on the clocks, unless the clocks went back across a midnight (00:30 to
	// 23:30 the day before): the next day has begun already, and t is in its window.
	if next := d.Next(); !t.Before(next.Start(loc)) {
		return next
	}
	return d
}

// dateIn is the date t reads on loc's clocks.
func dateIn(t time.Time, loc *time.Location) Day {
	y, m, d := t.In(loc).Date()
	return Day{y, m, d}
}

// String writes the day as YYYY-MM-DD.
func (d Day) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// AddDays is the day n days later (earlier for a negative n); month and year ends roll over.
func (d Day) AddDays(n int) Day {
	return dateIn(time.Date(d.Year, d.Month, d.Day+n, 12, 0, 0, 0, time.UTC), time.UTC)
}

// Next is the day after d.
func (d Day) Next() Day { return d.AddDays(1) }

// AddMonths is the day k months after d with d's day of the month, or the last day of that
// month when it is shorter: Jan 31 + 1 month is Feb 28 (29 in a leap year), + 2 months
// Mar 31. Always counted from d, never from the previous month's, so a short month does not
// pull the later ones back.
func (d Day) AddMonths(k int) Day {
	first := time.Date(d.Year, d.Month+time.Month(k), 1, 12, 0, 0, 0, time.UTC)
	last := first.AddDate(0, 1, -1).Day()
	return Day{first.Year(), first.Month(), min(d.Day, last)}
}

// Before reports whether d is an earlier day than e.
func (d Day) Before(e Day) bool {
	if d.Year != e.Year {
		return d.Year < e.Year
	}
	if d.Month != e.Month {
		return d.Month < e.Month
	}
	return d.Day < e.Day
}

// Start is the first instant of d in loc (see Day), in UTC.
func (d Day) Start(loc *time.Location) time.Time {
	t := time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
	// A midnight the clocks skip, moved back into the day before: the day begins where
	// that day's zone period (the one before the change) ends.
	for i := 0; i < 4 && dateIn(t, loc).Before(d); i++ {
		_, end := t.ZoneBounds()
		if end.IsZero() {
			break
		}
		t = end
	}
	// A midnight the clocks repeat: when the period before t's still reads d, the day
	// began in it, at its own midnight (or at its start, should that be later).
	for i := 0; i < 4; i++ {
		from, _ := t.ZoneBounds()
		if from.IsZero() {
			break
		}
		prev := from.Add(-time.Nanosecond)
		if dateIn(prev, loc) != d {
			break
		}
		_, offset := prev.Zone()
		t = time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, time.UTC).Add(-time.Duration(offset) * time.Second)
		if pfrom, _ := prev.ZoneBounds(); !pfrom.IsZero() && t.Before(pfrom) {
			t = pfrom
		}
	}
	return t.UTC()
}

// End is where d ends in loc, the start of the next day: d's window is [Start, End). A day
// on which loc's clocks change is 23 or 25 hours long (or some other length where the
// change is not an hour).
func (d Day) End(loc *time.Location) time.Time { return d.Next().Start(loc) }

// Window is d's instants in loc, [Start, End). Consecutive windows tile time with no gap and
// no overlap, and Of of every instant of the window is d.
func (d Day) Window(loc *time.Location) (start, end time.Time) { return d.Start(loc), d.End(loc) }

// Contains reports whether instant t is on d in loc.
func (d Day) Contains(t time.Time, loc *time.Location) bool {
	start, end := d.Window(loc)
	return !t.Before(start) && t.Before(end)
}
