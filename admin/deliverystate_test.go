package admin

import (
	"strings"
	"testing"

	"github.com/tekrar/tekrar/checkout/report"
)

// An event's state is its deliveries': one whose every delivery is failing is never called
// dispatched and left at that, and its class is that of its worst delivery.
func TestEventStateSaysHowItsDeliveriesStand(t *testing.T) {
	for _, c := range []struct {
		job         string
		counts      report.EventDeliveryCounts
		words, kind string
	}{
		{report.DispatchDone, report.EventDeliveryCounts{All: 1, Retrying: 1}, "dispatched · 0 of 1 delivered, 1 retrying", "retrying"},
		{report.DispatchDone, report.EventDeliveryCounts{All: 2, Delivered: 2}, "dispatched · 2 of 2 delivered", "delivered"},
		{report.DispatchDone, report.EventDeliveryCounts{All: 3, Delivered: 1, Waiting: 1, Dead: 1}, "dispatched · 1 of 3 delivered, 1 waiting, 1 dead", "dead"},
		{report.DispatchDone, report.EventDeliveryCounts{}, "dispatched · sent to no endpoint", "waiting"},
		{report.DispatchWaiting, report.EventDeliveryCounts{}, "waiting", "stale"},
		{report.DispatchRetrying, report.EventDeliveryCounts{}, "failed, will retry", "ignored"},
		{report.DispatchDiscarded, report.EventDeliveryCounts{}, "discarded: not dispatched", "ignored"},
	} {
		words, kind := eventState(c.job, c.counts)
		if words != c.words || kind != c.kind {
			t.Errorf("%s %+v: %q (%s), want %q (%s)", c.job, c.counts, words, kind, c.words, c.kind)
		}
	}
	for _, c := range []struct {
		state    string
		attempts int
		want     string
	}{{"succeeded", 1, "delivered"}, {"pending", 0, "waiting"}, {"pending", 3, "retrying"}, {"dead", 9, "dead"}} {
		if got := deliveryState(c.state, c.attempts); got != c.want {
			t.Errorf("%s after %d attempts: %q, want %q", c.state, c.attempts, got, c.want)
		}
	}
	if got := excerpt(strings.Repeat("é", excerptLimit+1)); got != strings.Repeat("é", excerptLimit)+"…" {
		t.Errorf("an excerpt of %d characters: %q", excerptLimit+1, got)
	}
}
