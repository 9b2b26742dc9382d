package receipts

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
	"github.com/tekrar/tekrar/internal/config"
)

// refusals counts what a Recorder's Refused hook heard, by reason.
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) hook(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[reason]++
}

func (r *refusals) of(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// bounded is a sending recorder with the given bounds, on the clock *now, whose refusals
// are counted in ref.
func bounded(perMinute, perDay int, now *atomic.Pointer[time.Time], ref *refusals) *Recorder {
	return &Recorder{From: testFrom, Send: true, PerMinute: perMinute, PerDay: perDay, Refused: ref.hook,
		Now: func() time.Time { return *now.Load() }}
}

func clockAt(t time.Time) *atomic.Pointer[time.Time] {
	var p atomic.Pointer[time.Time]
	p.Store(&t)
	return &p
}

// TestConcurrentReceiptsStopAtTheCap: 30 paid orders' receipts recorded at once (a barrier
// of dispatch transactions) against a daily cap of 7: exactly 7 are queued, and sent (the
// mail sink gets 7 messages), 23 are stored refused with reason daily_cap, and the metric's
// hook heard 23; the day's counter row holds 7.
func TestConcurrentReceiptsStopAtTheCap(t *testing.T) {
	const n, limit = 30, 7
	f := newFixture(t)
	mb := receiptstest.New(t, "", "")
	client := f.client("Shop")
	orders := make([]string, n)
	for i := range orders {
		orders[i], _ = f.paidOrder(client, "ayse@example.com")
	}
	var ref refusals
	rc := bounded(1000, limit, clockAt(testNow), &ref)

	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	ids := make([]int64, n)
	queued := make([]bool, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tx, err := f.db.DB.BeginTx(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			defer tx.Rollback()
			if ids[i], queued[i], err = rc.Record(ctx, tx, eventID(), KindPaid, orders[i], ""); err != nil {
				errs <- err
				return
			}
			errs <- tx.Commit()
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := sender(f, mb)
	sent := 0
	for i, id := range ids {
		if id == 0 {
			t.Fatalf("receipt %d not recorded", i)
		}
		if queued[i] {
			sent++
			if err := s.Deliver(ctx, id, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sent != limit || len(mb.Messages()) != limit {
		t.Errorf("%d queued, %d messages, want %d", sent, len(mb.Messages()), limit)
	}
	if got := f.count(`state = 'sent'`); got != limit {
		t.Errorf("%d sent receipts, want %d", got, limit)
	}
	if got := f.count(`state = 'refused' AND refused_reason = 'daily_cap'`); got != n-limit {
		t.Errorf("%d refused receipts, want %d", got, n-limit)
	}
	if got := ref.of(ReasonDailyCap); got != n-limit {
		t.Errorf("the metric heard %d refusals, want %d", got, n-limit)
	}
	var counted int
	if err := f.db.Get(&counted, `SELECT sent FROM receipt_counts WHERE client_id = $1 AND kind = 'day'`, client); err != nil || counted != limit {
		t.Errorf("the day's count %d (%v), want %d", counted, err, limit)
	}
}

// TestDailyCapResetsTheNextDay: a client at its daily cap has its next receipt refused
// until the UTC day changes; then receipts are queued again, and the past day's minute rows
// are gone. Another client is never held
// by the first's count. An event dispatched again (after a crash) takes no second place.
func TestDailyCapResetsTheNextDay(t *testing.T) {
	f := newFixture(t)
	client, other := f.client("Shop"), f.client("Other shop")
	var ref refusals
	now := clockAt(time.Date(2026, 12, 3, 23, 58, 0, 0, time.UTC))
	rc := bounded(1000, 2, now, &ref)
	order := func(c int64) string { o, _ := f.paidOrder(c, "ayse@example.com"); return o }

	ev := eventID()
	o1 := order(client)
	if _, q := f.record(rc, ev, KindPaid, o1, ""); !q {
		t.Fatal("the first receipt of the day was not queued")
	}
	if again, _ := f.record(rc, ev, KindPaid, o1, ""); again != 0 {
		t.Fatal("the event dispatched again made a second receipt")
	}
	if _, q := f.record(rc, eventID(), KindPaid, order(client), ""); !q {
		t.Fatal("the second receipt of the day (the event's rerun took no place) was not queued")
	}
	id, q := f.record(rc, eventID(), KindPaid, order(client), "")
	if state, _, _, _ := f.row(id); q || state != StateRefused {
		t.Fatalf("over the cap: queued %v, state %s", q, state)
	}
	if _, q := f.record(rc, eventID(), KindPaid, order(other), ""); !q {
		t.Fatal("another client's receipt was held by the first's cap")
	}

	next := time.Date(2026, 12, 4, 0, 0, 1, 0, time.UTC)
	now.Store(&next)
	if _, q := f.record(rc, eventID(), KindPaid, order(client), ""); !q {
		t.Fatal("the next day's first receipt was not queued")
	}
	if got := ref.of(ReasonDailyCap); got != 1 {
		t.Errorf("%d refusals, want 1", got)
	}
	var minutes, days int
	if err := f.db.QueryRow(`SELECT count(*) FILTER (WHERE kind = 'minute'), count(*) FILTER (WHERE kind = 'day')
		  FROM receipt_counts WHERE client_id = $1`, client).Scan(&minutes, &days); err != nil || minutes != 1 || days != 2 {
		t.Errorf("the client's rows: %d minutes, %d days (%v), want today's minute and both days", minutes, days, err)
	}
}

// TestPerMinuteLimitRefusesABurst: a burst past the minute's limit is refused with reason
// rate_limited, and gives its day's place back; the next minute sends again.
func TestPerMinuteLimitRefusesABurst(t *testing.T) {
	f := newFixture(t)
	client := f.client("Shop")
	var ref refusals
	now := clockAt(testNow)
	rc := bounded(3, 100, now, &ref)
	var queued, refused []int64
	for range 5 {
		o, _ := f.paidOrder(client, "ayse@example.com")
		id, q := f.record(rc, eventID(), KindPaid, o, "")
		if q {
			queued = append(queued, id)
		} else {
			refused = append(refused, id)
		}
	}
	if len(queued) != 3 || len(refused) != 2 {
		t.Fatalf("%d queued, %d refused, want 3 and 2", len(queued), len(refused))
	}
	var reason string
	if err := f.db.Get(&reason, `SELECT refused_reason FROM receipts WHERE id = $1`, refused[0]); err != nil || reason != ReasonRateLimited {
		t.Errorf("refused for %q (%v)", reason, err)
	}
	var day int
	if err := f.db.Get(&day, `SELECT sent FROM receipt_counts WHERE client_id = $1 AND kind = 'day'`, client); err != nil || day != 3 {
		t.Errorf("the day counted %d (%v), want 3: a refused receipt takes no place", day, err)
	}
	later := testNow.Add(time.Minute)
	now.Store(&later)
	o, _ := f.paidOrder(client, "ayse@example.com")
	if _, q := f.record(rc, eventID(), KindPaid, o, ""); !q {
		t.Error("the next minute's receipt was not queued")
	}
	if got := ref.of(ReasonRateLimited); got != 2 {
		t.Errorf("%d refusals, want 2", got)
	}
}

// TestSettingsAreTheDefaults: TEKRAR_RECEIPTS_PER_MINUTE and TEKRAR_RECEIPTS_PER_DAY
// default to PerMinuteDefault and PerDayDefault, the bounds of a Recorder left zero.
func TestSettingsAreTheDefaults(t *testing.T) {
	c, err := config.LoadServer("serve", nil, func(string) string { return "" }, io.Discard)
	if err != nil || c.ReceiptsPerMinute != PerMinuteDefault || c.ReceiptsPerDay != PerDayDefault {
		t.Fatalf("settings %d, %d (%v); defaults %d, %d", c.ReceiptsPerMinute, c.ReceiptsPerDay, err, PerMinuteDefault, PerDayDefault)
	}
}
