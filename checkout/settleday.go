package checkout

import (
	"fmt"
	"time"
)

// Day is a business day: a date on a client's calendar, which becomes a window of instants
// only in the client's time zone (Window). It is a value: comparable, usable as a map key.
type Day struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDay reads a day written YYYY-MM-DD; a date that does not exist (2027-02-29,
// 2026-04-31) is refused.
func ParseDay(s string) (Day, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Day{}, fmt.Errorf("%q is not a date written YYYY-MM-DD", s)
	}
	return DayOf(t, time.UTC), nil
}

// DayOf is the business day instant t falls on in loc.
func DayOf(t time.Time, loc *time.Location) Day {
	y, m, d := t.In(loc).Date()
	return Day{y, m, d}
}

// String writes the day as YYYY-MM-DD.
func (d Day) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// AddDays is the day n days later (earlier for a negative n); month and year ends roll over.
func (d Day) AddDays(n int) Day {
	return DayOf(time.Date(d.Year, d.Month, d.Day+n, 12, 0, 0, 0, time.UTC), time.UTC)
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

// Window is the day's instants in loc, [start, end): from its midnight to the next day's.
// A day on which loc's clocks change is 23 or 25 hours long. Where a midnight does not
// exist (a zone that moves its clocks at 00:00), Go's normalisation of time.Date picks the
// instant; since the end of a day and the start of the next are computed the same way,
// consecutive windows still tile time with no gap and no overlap.
func (d Day) Window(loc *time.Location) (start, end time.Time) {
	start = time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
	end = time.Date(d.Year, d.Month, d.Day+1, 0, 0, 0, 0, loc)
	return start.UTC(), end.UTC()
}
