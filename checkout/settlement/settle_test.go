package settlement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/calendar"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
	"github.com/tekrar/tekrar/checkout/psp"
)

// settleEnv is an action env whose client keeps its days in zone, and a settler on its
// database with a clock of its own.
type settleEnv struct {
	*actionEnv
	zone    string
	loc     *time.Location
	settler *Settler
	settled checkouttest.Clock // the settler's clock
}

func newSettleEnv(t *testing.T, zone string) *settleEnv {
	t.Helper()
	e := &settleEnv{actionEnv: newActionEnv(checkouttest.New(t, checkouttest.Options{Zone: zone})), zone: zone}
	e.loc = checkouttest.Location(t, zone)
	// The client existed long before the days the tests settle.
	if _, err := e.DB.Exec(`UPDATE clients SET created_at = '2020-01-01' WHERE id = $1`, e.Client.ID); err != nil {
		t.Fatal(err)
	}
	e.settler = New(e.DB, Config{Now: e.settled.Now}, nil)
	return e
}

// at sets the service's clock (orders, refunds) to t.
func (e *settleEnv) at(t time.Time) { e.Set(t.UTC()) }

// settleAt sets the settler's clock to t.
func (e *settleEnv) settleAt(t time.Time) { e.settled.Set(t) }

// paidAt pays an order of amount with the service's clock at t; it returns the order's
// public id.
func (e *settleEnv) paidAt(t time.Time, key string, amount int64) string {
	e.T.Helper()
	e.at(t)
	id, status := e.Order(key, psp.TokenVisa, amount)
	if status != 201 {
		e.T.Fatalf("order %s: %d", key, status)
	}
	return id
}

// refundAt refunds amount of order with the service's clock at t.
func (e *settleEnv) refundAt(t time.Time, key, order string, amount int64) {
	e.T.Helper()
	e.at(t)
	if status := e.Refund(key, order, amount); status != 201 {
		e.T.Fatalf("refund %s: %d", key, status)
	}
}

// disputeAt records a dispute of order opened at t, as the provider's webhook does.
func (e *settleEnv) disputeAt(t time.Time, order string, amount int64) {
	e.T.Helper()
	if _, err := e.DB.Exec(`
		INSERT INTO order_disputes (order_id, provider, dispute_id, amount, reason, status, opened_at)
		SELECT id, 'psp', 'dp_' || md5(random()::text), $2, 'fraudulent', 'open', $3 FROM orders WHERE public_id = $1`,
		order, amount, t); err != nil {
		e.T.Fatal(err)
	}
}

// compensatedAt records a compensation of the client refunded at t.
func (e *settleEnv) compensatedAt(t time.Time, amount int64) {
	e.T.Helper()
	if _, err := e.DB.Exec(`
		WITH o AS (
		    INSERT INTO orders (client_id, status, amount, currency, items, created_at, updated_at)
		    VALUES ($1, 'canceled', $2, 'TRY', '[]', $3, $3) RETURNING id)
		INSERT INTO compensations (client_id, order_id, charge_key, reason, state, charge_id, refund_id, amount, currency,
		                           next_attempt_at, watch_until, created_at, settled_at)
		SELECT $1, o.id, 'ck-' || o.id, 'test', 'refunded', 'ch_' || o.id, 're_' || o.id, $2, 'TRY', $3, $3, $3, $3 FROM o`,
		e.Client.ID, amount, t); err != nil {
		e.T.Fatal(err)
	}
}

func (e *settleEnv) settle(day string) Settlement {
	e.T.Helper()
	d, err := calendar.Parse(day)
	if err != nil {
		e.T.Fatal(err)
	}
	s, err := e.settler.Settle(context.Background(), e.Client.ID, d)
	if err != nil {
		e.T.Fatalf("settle %s: %v", day, err)
	}
	return s
}

// totals is a settlement's totals in TRY, as one comparable line.
func totalsLine(s Settlement) string {
	var out string
	for _, t := range s.Totals {
		out += fmt.Sprintf("%s captured %d/%d refunded %d/%d disputed %d/%d compensated %d/%d; ", t.Currency,
			t.CapturedAmount, t.CapturedCount, t.RefundedAmount, t.RefundedCount, t.DisputedAmount, t.DisputedCount,
			t.CompensatedAmount, t.CompensatedCount)
	}
	return out
}

// TestSettleADayOnce: a day of a client in Europe/Istanbul (UTC+3, whose day ends at 21:00
// UTC), with movements on both sides of its edges, settled by eight goroutines at once (each
// with its own transaction), then five times in a row: one row, the same totals every time,
// every movement of the day counted once and none of the next day's.
func TestSettleADayOnce(t *testing.T) {
	t.Parallel()
	e := newSettleEnv(t, "Europe/Istanbul")
	before := e.paidAt(checkouttest.UTC("2026-03-09T20:59:59.999999Z"), "k-before", 100) // 9 March, 23:59:59 in Istanbul
	first := e.paidAt(checkouttest.UTC("2026-03-09T21:00:00Z"), "k-first", 1000)         // 10 March, 00:00
	e.paidAt(checkouttest.UTC("2026-03-10T12:00:00Z"), "k-noon", 2000)
	e.refundAt(checkouttest.UTC("2026-03-10T13:00:00Z"), "r-first", first, 300)
	e.disputeAt(checkouttest.UTC("2026-03-10T14:00:00Z"), before, 100)
	e.compensatedAt(checkouttest.UTC("2026-03-10T20:59:59Z"), 700)
	last := e.paidAt(checkouttest.UTC("2026-03-10T20:59:59.999999Z"), "k-last", 4000) // 10 March, 23:59:59
	e.paidAt(checkouttest.UTC("2026-03-10T21:00:00Z"), "k-next", 8000)                // 11 March
	e.refundAt(checkouttest.UTC("2026-03-10T21:00:00Z"), "r-next", last, 4000)        // 11 March

	e.settleAt(checkouttest.UTC("2026-03-12T00:00:00Z"))
	want := "TRY captured 7000/3 refunded 300/1 disputed 100/1 compensated 700/1; "
	// Eight at once first (the day is not settled yet), then five more, one after another.
	var got []Settlement
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			d, _ := calendar.Parse("2026-03-10")
			s, err := e.settler.Settle(context.Background(), e.Client.ID, d)
			if err != nil {
				t.Errorf("settle at once: %v", err)
				return
			}
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	for range 5 {
		got = append(got, e.settle("2026-03-10"))
	}
	created := 0
	for _, s := range got {
		if s.Created {
			created++
		}
		if l := totalsLine(s); l != want || s.ID != got[0].ID || s.Items != 6 || s.Adjusted != 0 {
			t.Errorf("settlement %d: %s, %d items, %d adjusted; want %s, 6 items, settlement %d", s.ID, l, s.Items, s.Adjusted, want, got[0].ID)
		}
		if s.StartsAt != checkouttest.UTC("2026-03-09T21:00:00Z") || s.EndsAt != checkouttest.UTC("2026-03-10T21:00:00Z") {
			t.Errorf("window %s to %s, want 21:00 UTC to 21:00 UTC", s.StartsAt, s.EndsAt)
		}
	}
	if created != 1 {
		t.Errorf("%d calls wrote the settlement, want 1", created)
	}
	if n := e.Count(`SELECT count(*) FROM settlements WHERE client_id = $1 AND day = '2026-03-10'`, e.Client.ID); n != 1 {
		t.Errorf("%d settlements of the day, want 1", n)
	}
	if n := e.Count(`SELECT count(*) FROM settlement_items`); n != 6 {
		t.Errorf("%d movements claimed, want the day's 6", n)
	}

	// More days, each settled by four goroutines at once: a race the lock must decide.
	e.settleAt(checkouttest.UTC("2026-04-01T00:00:00Z"))
	nextDay, _ := calendar.Parse("2026-03-11")
	for i := range 20 {
		d := nextDay.AddDays(i)
		var wrote atomic.Int32
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				s, err := e.settler.Settle(context.Background(), e.Client.ID, d)
				if err != nil {
					t.Errorf("settle %s at once: %v", d, err)
				} else if s.Created {
					wrote.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if wrote.Load() != 1 {
			t.Errorf("%s: %d calls wrote the settlement, want 1", d, wrote.Load())
		}
	}
	if n := e.Count(`SELECT count(*) FROM settlements WHERE client_id = $1`, e.Client.ID); n != 21 {
		t.Errorf("%d settlements of 21 days", n)
	}
	if n := e.Count(`SELECT count(*) FROM settlement_items`); n != 8 {
		t.Errorf("%d movements claimed, want 8 (11 March's two more)", n)
	}
	if n := e.Count(`SELECT count(*) FROM settlement_totals WHERE settlement_id = $1`, got[0].ID); n != 1 {
		t.Errorf("%d totals rows, want 1 (TRY)", n)
	}
}

// TestLateMovementsAreAdjustments: movements of a day recorded after the day was settled
// (a refund whose transaction straddled the close, a dispute whose webhook came late) do
// not change the day's row: a rerun of the day returns it unchanged and says what waits;
// the next settlement counts them, once, as adjustments naming their day; a movement of
// a day not settled yet is left for that day.
func TestLateMovementsAreAdjustments(t *testing.T) {
	t.Parallel()
	e := newSettleEnv(t, "Europe/Istanbul")
	o := e.paidAt(checkouttest.UTC("2026-03-10T10:00:00Z"), "k-1", 5000)
	e.settleAt(checkouttest.UTC("2026-03-10T21:00:00Z")) // the instant the day ends
	day := e.settle("2026-03-10")
	before := totalsLine(day)

	// Recorded after the settlement, dated inside 10 March.
	e.refundAt(checkouttest.UTC("2026-03-10T20:59:30Z"), "r-late", o, 1200)
	e.disputeAt(checkouttest.UTC("2026-03-10T20:00:00Z"), o, 500)
	// Recorded on 11 March, dated 11 March: no adjustment.
	e.refundAt(checkouttest.UTC("2026-03-11T08:00:00Z"), "r-next", o, 800)

	e.settleAt(checkouttest.UTC("2026-03-12T00:00:00Z"))
	for range 3 {
		again := e.settle("2026-03-10")
		if again.Created || totalsLine(again) != before || again.ID != day.ID || again.Waiting != 2 {
			t.Fatalf("rerun of the settled day: created %v, %s, waiting %d; want the row as written (%s) and 2 waiting",
				again.Created, totalsLine(again), again.Waiting, before)
		}
	}
	next := e.settle("2026-03-11")
	if want := "TRY captured 0/0 refunded 800/1 disputed 0/0 compensated 0/0; "; totalsLine(next) != want || next.Adjusted != 2 {
		t.Fatalf("next day: %s with %d adjustments; want %s with 2", totalsLine(next), next.Adjusted, want)
	}
	for range 3 {
		if again := e.settle("2026-03-11"); again.Adjusted != 2 || again.Waiting != 0 {
			t.Fatalf("rerun of the next day: %d adjustments, %d waiting; want 2, 0", again.Adjusted, again.Waiting)
		}
		if again := e.settle("2026-03-10"); again.Waiting != 0 || totalsLine(again) != before {
			t.Fatalf("rerun of the first day after the adjustments: %d waiting, %s", again.Waiting, totalsLine(again))
		}
	}
	var adj []struct {
		Kind       string `db:"kind"`
		Day        string `db:"day"`
		Settlement string `db:"settled_on"`
		Amount     int64  `db:"amount"`
	}
	if err := e.DB.Select(&adj, `
		SELECT i.kind, to_char(i.day, 'YYYY-MM-DD') AS day, to_char(s.day, 'YYYY-MM-DD') AS settled_on, i.amount
		  FROM settlement_items i JOIN settlements s ON s.id = i.settlement_id
		 WHERE i.adjusted ORDER BY i.kind`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(adj) != "[{dispute 2026-03-10 2026-03-11 500} {refund 2026-03-10 2026-03-11 1200}]" {
		t.Fatalf("adjustments %v, want the dispute and the refund of 10 March, on 11 March's settlement", adj)
	}

	// 13 March is not settled; a movement of it must wait for it, not ride on 14 March.
	e.paidAt(checkouttest.UTC("2026-03-13T09:00:00Z"), "k-13", 100)
	e.settleAt(checkouttest.UTC("2026-03-15T00:00:00Z"))
	if s := e.settle("2026-03-14"); s.Adjusted != 0 || s.Items != 0 {
		t.Fatalf("14 March counted %d items, %d adjustments; want none (13 March is not settled)", s.Items, s.Adjusted)
	}
	if s := e.settle("2026-03-13"); s.Items != 1 || s.Adjusted != 0 {
		t.Fatalf("13 March counted %d items, %d adjustments; want its own order", s.Items, s.Adjusted)
	}
	if n := e.Count(`SELECT count(*) FROM settlement_items`); n != 5 {
		t.Fatalf("%d movements claimed, want 5, each once", n)
	}
}

// TestADaySettledEarlyIsCountedByTheNextSettlement: a day settled while its traffic still
// arrives (an operator's `tekrar settle` during the day, as the simulated month does) gets a
// payment and a refund recorded after its settlement, dated inside it. They are counted by
// no settlement until the client's next one, which counts them as adjustments of the day;
// a rerun of the day in between reports them waiting. A check that every movement is
// settled holds only once that next settlement is written.
func TestADaySettledEarlyIsCountedByTheNextSettlement(t *testing.T) {
	t.Parallel()
	e := newSettleEnv(t, "America/New_York")
	o := e.paidAt(checkouttest.UTC("2024-03-31T11:00:00Z"), "k-1", 5000)
	e.settleAt(checkouttest.UTC("2026-12-04T19:00:00Z")) // the wall clock: the day is long over
	day := e.settle("2024-03-31")
	if day.Items != 1 {
		t.Fatalf("the early settlement counted %d movements, want the order paid before it", day.Items)
	}
	e.paidAt(checkouttest.UTC("2024-03-31T11:00:01Z"), "k-2", 700)
	e.refundAt(checkouttest.UTC("2024-03-31T11:00:02Z"), "r-1", o, 1200)
	unsettled := `
		SELECT (SELECT count(*) FROM payments p WHERE status = 'succeeded'
		          AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'capture' AND i.source_id = p.order_id))
		     + (SELECT count(*) FROM refunds r WHERE status = 'succeeded'
		          AND NOT EXISTS (SELECT 1 FROM settlement_items i WHERE i.kind = 'refund' AND i.source_id = r.id))`
	if again := e.settle("2024-03-31"); again.Waiting != 2 || again.Items != 1 || again.Created {
		t.Fatalf("rerun of the day: created %v, %d movements, %d waiting; want the row as written and 2 waiting",
			again.Created, again.Items, again.Waiting)
	}
	if n := e.Count(unsettled); n != 2 {
		t.Fatalf("%d movements unsettled before the next settlement, want the 2 late ones", n)
	}
	next := e.settle("2024-04-01")
	if next.Items != 0 || next.Adjusted != 2 || totalsLine(next) != "" {
		t.Fatalf("the next day: %d movements, %d adjustments, %s; want the 2 late ones as adjustments only",
			next.Items, next.Adjusted, totalsLine(next))
	}
	if n := e.Count(unsettled); n != 0 {
		t.Fatalf("%d movements unsettled after the next settlement, want none", n)
	}
	if n := e.Count(`SELECT count(*) FROM settlement_items WHERE adjusted AND day = '2024-03-31'`); n != 2 {
		t.Fatalf("%d adjustments name 31 March, want 2", n)
	}
}

// TestAnOldDisputeRecordedLateIsAnAdjustment: a dispute counts on the day the provider says
// it opened, which may be long before tekrar records it (a webhook lost and the dispute found
// by a reconciliation months later). Recorded after its day was settled, it is an adjustment
// of the client's next settlement however old its day is, and a rerun of its day reports it
// waiting; it is not left out because it is older than the late window of the other movements,
// whose time is tekrar's own.
func TestAnOldDisputeRecordedLateIsAnAdjustment(t *testing.T) {
	t.Parallel()
	e := newSettleEnv(t, "Europe/Istanbul")
	o := e.paidAt(checkouttest.UTC("2026-01-05T10:00:00Z"), "k-1", 5000)
	e.settleAt(checkouttest.UTC("2026-03-20T00:00:00Z"))
	jan5 := e.settle("2026-01-05")
	e.disputeAt(checkouttest.UTC("2026-01-05T12:00:00Z"), o, 900) // recorded on 19 March, 73 days later
	if again := e.settle("2026-01-05"); again.Waiting != 1 {
		t.Fatalf("rerun of 5 January: %d waiting, want the dispute", again.Waiting)
	}
	next := e.settle("2026-03-19")
	if next.Adjusted != 1 || next.Items != 0 {
		t.Fatalf("19 March: %d movements, %d adjustments; want the dispute of 5 January as its adjustment", next.Items, next.Adjusted)
	}
	if n := e.Count(`SELECT count(*) FROM settlement_items WHERE kind = 'dispute' AND adjusted AND day = '2026-01-05'
	                    AND settlement_id = $1`, next.ID); n != 1 {
		t.Fatalf("%d dispute adjustments of 5 January on 19 March's settlement, want 1", n)
	}
	if again := e.settle("2026-01-05"); again.Waiting != 0 || totalsLine(again) != totalsLine(jan5) {
		t.Fatalf("rerun of 5 January after: %d waiting, %s; want none and the row as written", again.Waiting, totalsLine(again))
	}
}

// TestSettleDueFollowsTheClientsDay drives SettleDue with a clock: a client in Istanbul,
// one in UTC and one in Europe/Berlin across its 23- and 25-hour days, month ends and 29
// February. Each pass settles exactly the days that ended (plus the grace) in each zone.
func TestSettleDueFollowsTheClientsDay(t *testing.T) {
	t.Parallel()
	e := newSettleEnv(t, "Europe/Istanbul")
	ctx := context.Background()
	settledDays := func(clientID int64) string {
		t.Helper()
		var days []string
		if err := e.DB.Select(&days, `SELECT to_char(day, 'YYYY-MM-DD') FROM settlements WHERE client_id = $1 ORDER BY day`, clientID); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(days)
	}
	other := func(name, zone string) int64 {
		t.Helper()
		set := clients.DefaultSettings
		set.TimeZone = zone
		c, err := clients.CreateWith(ctx, e.DB, name, clients.NewSecret(), set)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.Exec(`UPDATE clients SET created_at = '2020-01-01' WHERE id = $1`, c.ID); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	london, berlin := other("london", "UTC"), other("berlin", "Europe/Berlin")
	s := New(e.DB, Config{LookBack: 2}, nil)
	pass := func(now string) {
		t.Helper()
		if _, err := s.SettleDue(ctx, checkouttest.UTC(now)); err != nil {
			t.Fatalf("pass at %s: %v", now, err)
		}
	}
	for _, step := range []struct {
		now                    string
		istanbul, utc, germany string
	}{
		// 10 March ends at 21:00 UTC in Istanbul; the grace is 15 minutes.
		{"2026-03-10T21:14:59.999Z", "[2026-03-08 2026-03-09]", "[2026-03-08 2026-03-09]", "[2026-03-08 2026-03-09]"},
		{"2026-03-10T21:15:00Z", "[2026-03-08 2026-03-09 2026-03-10]", "[2026-03-08 2026-03-09]", "[2026-03-08 2026-03-09]"},
		// Berlin (UTC+1 in March) ends it at 23:00 UTC.
		{"2026-03-10T23:14:59Z", "[2026-03-08 2026-03-09 2026-03-10]", "[2026-03-08 2026-03-09]", "[2026-03-08 2026-03-09]"},
		{"2026-03-10T23:15:00Z", "[2026-03-08 2026-03-09 2026-03-10]", "[2026-03-08 2026-03-09]", "[2026-03-08 2026-03-09 2026-03-10]"},
		{"2026-03-11T00:15:00Z", "[2026-03-08 2026-03-09 2026-03-10]", "[2026-03-08 2026-03-09 2026-03-10]", "[2026-03-08 2026-03-09 2026-03-10]"},
	} {
		pass(step.now)
		if got := settledDays(e.Client.ID); got != step.istanbul {
			t.Errorf("at %s Istanbul has %s, want %s", step.now, got, step.istanbul)
		}
		if got := settledDays(london); got != step.utc {
			t.Errorf("at %s UTC has %s, want %s", step.now, got, step.utc)
		}
		if got := settledDays(berlin); got != step.germany {
			t.Errorf("at %s Berlin has %s, want %s", step.now, got, step.germany)
		}
	}
	// Berlin's 23-hour day (29 March 2026) ends at 22:00 UTC; with the grace, due at 22:15.
	pass("2026-03-29T22:14:59Z")
	if got := settledDays(berlin); got != "[2026-03-08 2026-03-09 2026-03-10 2026-03-27 2026-03-28]" {
		t.Errorf("before 29 March ended in Berlin: %s", got)
	}
	pass("2026-03-29T22:15:00Z")
	if got := settledDays(berlin); got != "[2026-03-08 2026-03-09 2026-03-10 2026-03-27 2026-03-28 2026-03-29]" {
		t.Errorf("after 29 March ended in Berlin: %s", got)
	}
}

// TestSettlementOnTheCalendarsEdges: for a day with a clock change, a month end and 29
// February, the settlement counts the movement at the day's first instant and at its
// last, and neither of the instants just outside.
func TestSettlementOnTheCalendarsEdges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ zone, day string }{
		{"Europe/Berlin", "2026-03-29"},    // 23 hours
		{"Europe/Berlin", "2026-10-25"},    // 25 hours
		{"Europe/Istanbul", "2026-01-31"},  // month end
		{"Europe/Istanbul", "2028-02-29"},  // leap day
		{"America/New_York", "2026-11-01"}, // 25 hours
	} {
		t.Run(c.zone+" "+c.day, func(t *testing.T) {
			t.Parallel()
			e := newSettleEnv(t, c.zone)
			d, _ := calendar.Parse(c.day)
			start, end := d.Window(e.loc)
			e.paidAt(start.Add(-time.Microsecond), "k-before", 1)
			e.paidAt(start, "k-first", 10)
			e.paidAt(end.Add(-time.Microsecond), "k-last", 100)
			e.paidAt(end, "k-after", 1000)
			e.settleAt(end.Add(time.Hour))
			s := e.settle(c.day)
			if want := "TRY captured 110/2 refunded 0/0 disputed 0/0 compensated 0/0; "; totalsLine(s) != want {
				t.Fatalf("%s: %s, want %s", c.day, totalsLine(s), want)
			}
			if s.StartsAt != start || s.EndsAt != end {
				t.Fatalf("stored window %s to %s, want %s to %s", s.StartsAt, s.EndsAt, start, end)
			}
			e.settleAt(end.Add(-time.Microsecond))
			if _, err := e.settler.Settle(context.Background(), e.Client.ID, d.AddDays(1)); !errors.Is(err, ErrDayNotOver) {
				t.Fatalf("settling a day that has not ended: %v, want ErrDayNotOver", err)
			}
		})
	}
}

// TestInstallmentsAreSettled: the installments the scheduled job charges after the first
// are captures of their own, each counted once on the day tekrar recorded it paid, and one
// recorded after its day closed is an adjustment on the next settlement. Over the plan the
// settlements add up to what the provider charged.
func TestInstallmentsAreSettled(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "Europe/Istanbul", checkouttest.UTC("2027-01-31T10:00:00Z")) // 13:00 in Istanbul
	if _, err := e.DB.Exec(`UPDATE clients SET created_at = '2020-01-01' WHERE id = $1`, e.Client.ID); err != nil {
		t.Fatal(err)
	}
	var settledAt checkouttest.Clock
	settler := New(e.DB, Config{Now: settledAt.Now}, nil)
	settle := func(now, day string) Settlement {
		t.Helper()
		settledAt.Set(checkouttest.UTC(now))
		d, err := calendar.Parse(day)
		if err != nil {
			t.Fatal(err)
		}
		s, err := settler.Settle(context.Background(), e.Client.ID, d)
		if err != nil {
			t.Fatalf("settle %s: %v", day, err)
		}
		return s
	}
	chargeAt := func(at string, want int) {
		t.Helper()
		e.Set(checkouttest.UTC(at)) // the instant tekrar records the charge
		if res := e.run(at); res.Charged != want {
			t.Fatalf("installments at %s: %+v, want %d charged", at, res, want)
		}
	}
	_, id := e.Plan("k-sofa", 1000, 3) // 334 now, 333 on Feb 28 and on Mar 31

	check := func(s Settlement, name, want string, adjusted int) {
		t.Helper()
		if totalsLine(s) != want || s.Adjusted != adjusted {
			t.Fatalf("%s: %s with %d adjustments; want %s with %d", name, totalsLine(s), s.Adjusted, want, adjusted)
		}
	}
	check(settle("2027-02-01T00:00:00Z", "2027-01-31"), "the order's day: its first installment",
		"TRY captured 334/1 refunded 0/0 disputed 0/0 compensated 0/0; ", 0)
	chargeAt("2027-02-27T21:00:30Z", 1) // Feb 28, 00:00:30 in Istanbul
	for range 3 {
		check(settle("2027-03-01T00:00:00Z", "2027-02-28"), "Feb 28: the second installment",
			"TRY captured 333/1 refunded 0/0 disputed 0/0 compensated 0/0; ", 0)
	}
	// Mar 31 is settled before its installment is recorded; the charge is recorded a minute
	// before that day ends there, so it belongs to Mar 31 and comes late.
	check(settle("2027-04-01T00:00:00Z", "2027-03-31"), "Mar 31 before its installment", "", 0)
	chargeAt("2027-03-31T20:59:00Z", 1)
	if s := settle("2027-04-01T00:00:00Z", "2027-03-31"); totalsLine(s) != "" || s.Waiting != 1 {
		t.Fatalf("rerun of Mar 31: %s, %d waiting; want the row as written and the installment waiting", totalsLine(s), s.Waiting)
	}
	check(settle("2027-04-02T00:00:00Z", "2027-04-01"), "Apr 1: the late installment as an adjustment", "", 1)

	var got struct {
		Settled  int64 `db:"settled"`
		Items    int64 `db:"items"`
		Provider int64 `db:"provider"`
	}
	if err := e.DB.Get(&got, `
		SELECT (SELECT sum(amount) FROM settlement_items WHERE order_id = $1 AND kind IN ('capture', 'installment')) AS settled,
		       (SELECT count(*) FROM settlement_items WHERE order_id = $1) AS items,
		       (SELECT sum(c.amount) FROM psp_charges c, orders o WHERE o.id = $1 AND c.status = 'succeeded'
		         AND (c.description = 'order ' || o.public_id OR c.description LIKE 'order ' || o.public_id || ' installment %')) AS provider`,
		id); err != nil {
		t.Fatal(err)
	}
	if got.Settled != 1000 || got.Items != 3 || got.Provider != 1000 {
		t.Fatalf("settled %d in %d items, the provider charged %d; want 1000 in 3, and 1000", got.Settled, got.Items, got.Provider)
	}
}

// TestSettlementWhereMidnightIsSkipped: Havana's clocks go from 00:00 to 01:00 on 8 March
// 2026, so its 7 March lasts until 05:00 UTC on the 8th. An order paid at 23:30 on the 7th
// is the 7th's own item, and a refund dated 23:45 on the 7th, recorded after the 7th was
// settled, is an adjustment of the 7th on the 8th's settlement: the day's items and its late
// adjustments are placed by the same rule, and every item lies in the window of the day it
// names.
func TestSettlementWhereMidnightIsSkipped(t *testing.T) {
	t.Parallel()
	e := newSettleEnv(t, "America/Havana")
	o := e.paidAt(checkouttest.UTC("2026-03-07T12:00:00Z"), "k-7", 10)         // 07:00 CST on the 7th
	e.paidAt(checkouttest.UTC("2026-03-08T04:30:00Z"), "k-7-late-evening", 20) // 23:30 CST on the 7th
	e.settleAt(checkouttest.UTC("2026-03-08T06:00:00Z"))
	seventh := e.settle("2026-03-07")
	if !seventh.StartsAt.Equal(checkouttest.UTC("2026-03-07T05:00:00Z")) || !seventh.EndsAt.Equal(checkouttest.UTC("2026-03-08T05:00:00Z")) ||
		seventh.Items != 2 {
		t.Errorf("7 March: %s to %s with %d items; want 05:00 UTC to 05:00 UTC with both orders of the day",
			seventh.StartsAt.UTC().Format(time.RFC3339), seventh.EndsAt.UTC().Format(time.RFC3339), seventh.Items)
	}
	e.refundAt(checkouttest.UTC("2026-03-08T04:45:00Z"), "r-7", o, 5) // 23:45 CST on the 7th, recorded late
	e.paidAt(checkouttest.UTC("2026-03-08T12:00:00Z"), "k-8", 100)
	e.paidAt(checkouttest.UTC("2026-03-09T12:00:00Z"), "k-9", 1000)
	e.settleAt(checkouttest.UTC("2026-03-10T06:00:00Z"))
	eighth := e.settle("2026-03-08")
	if !eighth.StartsAt.Equal(checkouttest.UTC("2026-03-08T05:00:00Z")) || !eighth.EndsAt.Equal(checkouttest.UTC("2026-03-09T04:00:00Z")) ||
		eighth.Items != 1 || eighth.Adjusted != 1 {
		t.Errorf("8 March: %s to %s with %d items and %d adjustments; want 05:00 UTC to 04:00 UTC, 1 and 1",
			eighth.StartsAt.UTC().Format(time.RFC3339), eighth.EndsAt.UTC().Format(time.RFC3339), eighth.Items, eighth.Adjusted)
	}
	if ninth := e.settle("2026-03-09"); ninth.Items != 1 || ninth.Adjusted != 0 {
		t.Errorf("9 March: %d items, %d adjustments; want 1, 0", ninth.Items, ninth.Adjusted)
	}
	var items []struct {
		Kind       string    `db:"kind"`
		Day        time.Time `db:"day"`
		OccurredAt time.Time `db:"occurred_at"`
		StartsAt   time.Time `db:"starts_at"`
		EndsAt     time.Time `db:"ends_at"`
	}
	if err := e.DB.Select(&items, `
		SELECT i.kind, i.day, i.occurred_at, s.starts_at, s.ends_at
		  FROM settlement_items i JOIN settlements s ON s.client_id = i.client_id AND s.day = i.day
		 ORDER BY i.occurred_at`); err != nil {
		t.Fatal(err)
	}
	if len(items) != 5 {
		t.Fatalf("%d items, want 5", len(items))
	}
	for _, it := range items {
		day := calendar.Of(it.Day, time.UTC)
		if byRule := calendar.Of(it.OccurredAt, e.loc); byRule != day || it.OccurredAt.Before(it.StartsAt) || !it.OccurredAt.Before(it.EndsAt) {
			t.Errorf("%s at %s is counted on %s (window %s to %s); DayOf says %s", it.Kind,
				it.OccurredAt.UTC().Format(time.RFC3339), day, it.StartsAt.UTC().Format(time.RFC3339),
				it.EndsAt.UTC().Format(time.RFC3339), byRule)
		}
	}
}
