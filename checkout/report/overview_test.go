package report

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
)

func testOverview(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h, m := time.Hour, time.Minute
	counts, err := HistoryCounts(ctx, f.db, at0, at0.Add(6*h+2*m), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{checkout.KindCreated: 5, checkout.KindCompleted: 1, checkout.KindReplayed: 5, checkout.KindReusedConflict: 1,
		checkout.KindInUseRejected: 1, checkout.KindResumed: 0, checkout.KindExpired: 0, checkout.KindLateRetry: 0, CountRequests: 12}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("HistoryCounts = %v, want %v", counts, want)
	}
	counts, err = HistoryCounts(ctx, f.db, at0.Add(-30*24*h), at0.Add(30*24*h), f.pos)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]int64{checkout.KindCreated: 1, checkout.KindCompleted: 0, checkout.KindReplayed: 2, checkout.KindReusedConflict: 0,
		checkout.KindInUseRejected: 0, checkout.KindResumed: 0, checkout.KindExpired: 0, checkout.KindLateRetry: 0, CountRequests: 3}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("HistoryCounts(pos) = %v, want %v", counts, want)
	}
	counts, err = HistoryCounts(ctx, f.db, at0.Add(-23*h), at0.Add(-22*h+1), f.shop)
	if err != nil {
		t.Fatal(err)
	}
	if counts[checkout.KindExpired] != 1 || counts[checkout.KindLateRetry] != 1 || counts[CountRequests] != 1 {
		t.Errorf("HistoryCounts(sweep window) = %v", counts)
	}

	n, err := NeedsAttention(ctx, f.db)
	if err != nil || n != 1 {
		t.Errorf("NeedsAttention = %d, %v; want 1", n, err)
	}

	// Four two-hour buckets from at0: created at 0, 2h, 4h, 5h, 6h (twice); replays at
	// 1m, 2m, 3m, 2h1m, 6h1m, 6h2m (twice).
	rate, err := ReplayRate(ctx, f.db, at0, at0.Add(8*h), 4)
	if err != nil {
		t.Fatal(err)
	}
	wantRate := []RateBucket{
		{at0, at0.Add(2 * h), 1, 3},
		{at0.Add(2 * h), at0.Add(4 * h), 1, 1},
		{at0.Add(4 * h), at0.Add(6 * h), 2, 0},
		{at0.Add(6 * h), at0.Add(8 * h), 1, 3},
	}
	if fmt.Sprint(rate) != fmt.Sprint(wantRate) {
		t.Errorf("ReplayRate =\n%v, want\n%v", rate, wantRate)
	}
	// Uneven: 3 buckets over 10 minutes (200 s each); the replay at 3m is in the first.
	rate, err = ReplayRate(ctx, f.db, at0, at0.Add(10*m), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rate) != 3 || rate[0].Created != 1 || rate[0].Replayed != 3 || rate[1].Replayed != 0 ||
		!rate[2].End.Equal(at0.Add(10*m)) || !rate[1].Start.Equal(at0.Add(200*time.Second)) {
		t.Errorf("ReplayRate(3 over 10m) = %v", rate)
	}
	if _, err := ReplayRate(ctx, f.db, at0, at0.Add(h), 0); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("0 buckets: %v", err)
	}

	sweeps, err := RecentSweeps(ctx, f.db, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(sweeps) != 2 || sweeps[0].KeysDeleted != 3 || sweeps[0].Error != "boom" || sweeps[1].KeysDeleted != 2 ||
		sweeps[1].Error != "" || !sweeps[1].StartedAt.Equal(at0.Add(m)) || sweeps[1].Node != "node-a" {
		t.Errorf("RecentSweeps = %+v", sweeps)
	}
}
