package calendar

import (
	"testing"
	"time"
)

// TestDayBoundaries: a business day begins at the first instant of its date in the zone,
// and Of names the day whose window holds an instant: the one rule settlement (its own
// items and its late adjustments) and installments (their due instants) share. Zones with
// and without clock changes, one whose clocks skip midnight (Havana and Santiago into
// summer time: 00:00 is 01:00) and one whose clocks repeat it (Havana out of summer time:
// 01:00 is 00:00 again, and the day begins at the first 00:00).
func TestDayBoundaries(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone, day  string
		start, end string // UTC
	}{
		{"UTC", "2026-03-08", "2026-03-08T00:00:00Z", "2026-03-09T00:00:00Z"},
		{"Europe/Istanbul", "2026-03-08", "2026-03-07T21:00:00Z", "2026-03-08T21:00:00Z"},
		{"Europe/Istanbul", "2028-02-29", "2028-02-28T21:00:00Z", "2028-02-29T21:00:00Z"},
		{"America/New_York", "2026-03-08", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}, // 23 hours
		{"America/New_York", "2026-11-01", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"}, // 25 hours
		// Havana skips its midnight on 8 March: the 7th has 24 hours, the 8th begins at 01:00
		// (05:00 UTC) and has 23.
		{"America/Havana", "2026-03-07", "2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z"},
		{"America/Havana", "2026-03-08", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
		{"America/Havana", "2026-03-09", "2026-03-09T04:00:00Z", "2026-03-10T04:00:00Z"},
		// Santiago skips its midnight on 6 September.
		{"America/Santiago", "2026-09-06", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"},
		// Beirut skips its midnight on 29 March.
		{"Asia/Beirut", "2026-03-29", "2026-03-28T22:00:00Z", "2026-03-29T21:00:00Z"},
		// Havana repeats its midnight on 1 November: the day begins at the first 00:00 (CDT)
		// and has 25 hours.
		{"America/Havana", "2026-10-31", "2026-10-31T04:00:00Z", "2026-11-01T04:00:00Z"},
		{"America/Havana", "2026-11-01", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"},
		// Amman repeated its midnight on 28 October 2016 (01:00 EEST was 00:00 EET again), east
		// of UTC, where time.Date picks the second 00:00 (22:00 UTC): the day begins at the
		// first, 21:00 UTC.
		{"Asia/Amman", "2016-10-27", "2016-10-26T21:00:00Z", "2016-10-27T21:00:00Z"},
		{"Asia/Amman", "2016-10-28", "2016-10-27T21:00:00Z", "2016-10-28T22:00:00Z"},
	} {
		t.Run(c.zone+" "+c.day, func(t *testing.T) {
			d, err := Parse(c.day)
			if err != nil {
				t.Fatal(err)
			}
			loc := mustLoad(t, c.zone)
			start, end := d.Window(loc)
			if !start.Equal(utc(c.start)) || !end.Equal(utc(c.end)) {
				t.Fatalf("window %s to %s, want %s to %s", start.UTC().Format(time.RFC3339),
					end.UTC().Format(time.RFC3339), c.start, c.end)
			}
			if !d.Start(loc).Equal(start) || !d.End(loc).Equal(end) || !d.Contains(start, loc) ||
				!d.Contains(end.Add(-time.Nanosecond), loc) || d.Contains(end, loc) || d.Contains(start.Add(-time.Nanosecond), loc) {
				t.Errorf("Start, End and Contains disagree with the window")
			}
			if next, _ := d.Next().Window(loc); !next.Equal(end) {
				t.Errorf("the next day begins at %s, not where this one ends (%s)", next, end)
			}
			for _, at := range []struct {
				t    time.Time
				want Day
			}{
				{start.Add(-time.Nanosecond), d.AddDays(-1)},
				{start, d},
				{start.Add(end.Sub(start) / 2), d},
				{end.Add(-time.Nanosecond), d},
				{end, d.AddDays(1)},
			} {
				if got := Of(at.t, loc); got != at.want {
					t.Errorf("Of(%s) = %s, want %s", at.t.UTC().Format(time.RFC3339Nano), got, at.want)
				}
			}
		})
	}
}

// TestSettlementDayWindows: the instants a business day covers, in zones with and without
// clock changes, and the calendar's edges.
func TestSettlementDayWindows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone, day  string
		start, end string
	}{
		{"Europe/Istanbul", "2026-03-10", "2026-03-09T21:00:00Z", "2026-03-10T21:00:00Z"},
		{"UTC", "2026-03-10", "2026-03-10T00:00:00Z", "2026-03-11T00:00:00Z"},
		{"Europe/Berlin", "2026-03-29", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},    // 23 hours
		{"Europe/Berlin", "2026-10-25", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},    // 25 hours
		{"America/New_York", "2026-03-08", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}, // 23 hours
		{"Europe/Istanbul", "2028-02-29", "2028-02-28T21:00:00Z", "2028-02-29T21:00:00Z"},
		{"Europe/Istanbul", "2026-12-31", "2026-12-30T21:00:00Z", "2026-12-31T21:00:00Z"},
	} {
		d, err := Parse(c.day)
		if err != nil {
			t.Fatal(err)
		}
		loc, _ := time.LoadLocation(c.zone)
		start, end := d.Window(loc)
		if start != utc(c.start) || end != utc(c.end) {
			t.Errorf("%s in %s: %s to %s, want %s to %s", c.day, c.zone, start, end, c.start, c.end)
		}
		if next, _ := d.AddDays(1).Window(loc); next != end {
			t.Errorf("%s in %s: the next day starts at %s, not where this one ends (%s)", c.day, c.zone, next, end)
		}
	}
	for _, bad := range []string{"2027-02-29", "2026-04-31", "2026-13-01", "10.03.2026", ""} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	for from, want := range map[string]string{"2028-02-28": "2028-02-29", "2028-02-29": "2028-03-01",
		"2027-02-28": "2027-03-01", "2026-01-31": "2026-02-01", "2026-12-31": "2027-01-01"} {
		d, _ := Parse(from)
		if got := d.AddDays(1).String(); got != want {
			t.Errorf("the day after %s is %s, want %s", from, got, want)
		}
	}
}

// mustLoad is the IANA zone name's location, as the installments' and the root's tests load
// a client's zone.
func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// utc reads an RFC 3339 instant of a test's calendar (fractions allowed).
func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}
