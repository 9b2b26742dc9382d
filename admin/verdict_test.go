package admin

import (
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
)

func TestGapAndWindowText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		400 * time.Millisecond:                "400 ms",
		30 * time.Second:                      "30 s",
		30*time.Second + 400*time.Millisecond: "30 s",
		2*time.Minute + 5*time.Second:         "2 min 5 s",
		3 * time.Minute:                       "3 min",
		time.Hour + 3*time.Minute:             "1 h 3 min",
		-30 * time.Second:                     "30 s",
	} {
		if got := gapText(d); got != want {
			t.Errorf("gapText(%s) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		2 * time.Minute: "2m", 90 * time.Second: "1m30s", 24 * time.Hour: "24h", time.Second: "1s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%s) = %q, want %q", d, got, want)
		}
	}
}

// A key string used again after it was forgotten has two histories; an order's page shows
// the one that made it.
func TestIncarnation(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(at time.Duration, kind string) checkout.EventRow {
		return checkout.EventRow{At: t0.Add(at), Kind: kind}
	}
	events := []checkout.EventRow{
		ev(-40*24*time.Hour, checkout.EventCreated), ev(-40*24*time.Hour+time.Minute, checkout.EventReplayed),
		ev(0, checkout.EventCreated), ev(0, checkout.EventCompleted), ev(time.Minute, checkout.EventReplayed),
		ev(50*24*time.Hour, checkout.EventCreated), ev(50*24*time.Hour, checkout.EventReplayed),
	}
	got := incarnation(events, t0.Add(-time.Millisecond))
	if len(got) != 3 || !got[0].At.Equal(t0) || got[2].Kind != checkout.EventReplayed {
		t.Fatalf("incarnation: %+v", got)
	}
	if n := countRequests(got); n.replays != 1 {
		t.Fatalf("replays %d", n.replays)
	}
}
