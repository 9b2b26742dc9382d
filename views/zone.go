package views

import (
	"context"
	"time"
)

// The console shows every time in the operator's zone, labelled with the zone's name, and
// reads the times typed in its search forms in the same zone: one rule everywhere, so that
// a time copied from a table into a search finds the row. The UTC instant is in each
// time's title (shown on hover). The zone comes from the browser (console.js sets a
// cookie); without it, UTC.

type zoneKey struct{}

// WithZone puts the operator's zone into ctx, for every time the page renders.
func WithZone(ctx context.Context, loc *time.Location) context.Context {
	return context.WithValue(ctx, zoneKey{}, loc)
}

// ZoneOf is the operator's zone that ctx carries; UTC when none.
func ZoneOf(ctx context.Context) *time.Location {
	if loc, ok := ctx.Value(zoneKey{}).(*time.Location); ok && loc != nil {
		return loc
	}
	return time.UTC
}

// ZoneName names the operator's zone as labels show it: "Europe/Istanbul", "UTC".
func ZoneName(ctx context.Context) string {
	return ZoneOf(ctx).String()
}

// TimeLayout is how the console writes a time, without its zone.
const TimeLayout = "2006-01-02 15:04:05"

// InZone writes t in the operator's zone with the zone's name: "2025-03-01 15:00:00
// (Europe/Istanbul)"; "—" for the zero time.
func InZone(ctx context.Context, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(ZoneOf(ctx)).Format(TimeLayout) + " (" + ZoneName(ctx) + ")"
}

// utcTitle is the UTC instant, for a time's title.
func utcTitle(t time.Time) string {
	return t.UTC().Format(TimeLayout) + " UTC"
}
