package report

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// A settled day's movements are its own items (by what they add to, then time), the
// adjustments it counted, then the items of its day that a later settlement counted, and
// nothing of another client; the limit cuts the list, not the sums; EachSettlementMovement
// yields the same rows as the list.
func TestSettlementMovements(t *testing.T) {
	d := dbtest.New(t)
	f := seedConsole(t, d)
	ctx := context.Background()
	day := at0.Truncate(24 * time.Hour)
	settle := func(client int64, on time.Time) int64 {
		return f.id(`INSERT INTO settlements (client_id, day, time_zone, starts_at, ends_at, settled_at, process)
			VALUES ($1, CAST($2 AS date), 'UTC', $3, $4, $4, 'test:1') RETURNING id`, client, on.Format("2006-01-02"), on, on.Add(24*time.Hour))
	}
	prev, own, next := settle(f.shop, day.Add(-24*time.Hour)), settle(f.shop, day), settle(f.shop, day.Add(24*time.Hour))
	posDay := settle(f.pos, day.Add(24*time.Hour))
	item := func(kind string, source, client, settlement int64, on time.Time, adjusted bool, at time.Time, amount int64, order string) {
		f.exec(`INSERT INTO settlement_items (kind, source_id, client_id, settlement_id, day, adjusted, occurred_at, amount,
			currency, order_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'TRY', $9)`,
			kind, source, client, settlement, on, adjusted, at, amount, f.orders[order])
	}
	h := time.Hour
	item("capture", f.orders["a1"], f.shop, prev, day.Add(-24*h), false, day.Add(-2*h), 4500, "a1")
	item("refund", 71, f.shop, own, day, false, day.Add(5*h), 1000, "a1")
	item("capture", f.orders["a2"], f.shop, own, day, false, day.Add(10*h), 9000, "a2")
	item("capture", f.orders["tie-900001"], f.shop, own, day, false, day.Add(1*h), 3202, "tie-900001")
	item("refund", 72, f.shop, own, day.Add(-24*h), true, day.Add(-h), 500, "a1")
	item("dispute", 73, f.shop, next, day, true, day.Add(20*h), 9000, "a2")
	item("dispute", 74, f.pos, posDay, day, true, day.Add(20*h), 100, "a2") // another client's

	line := func(m SettlementMovement) string {
		return fmt.Sprintf("%s %s %s %s %d %s", m.Part, m.Kind, m.Day, m.OccurredAt.UTC().Format("15:04"), m.Amount, m.CountedOn)
	}
	d0, dm, dn := day.Format("2006-01-02"), day.Add(-24*h).Format("2006-01-02"), day.Add(24*h).Format("2006-01-02")
	want := []string{
		"own capture " + d0 + " 01:00 3202 " + d0,
		"own capture " + d0 + " 10:00 9000 " + d0,
		"own refund " + d0 + " 05:00 1000 " + d0,
		"adjustment refund " + dm + " 23:00 500 " + d0,
		"late dispute " + d0 + " 20:00 9000 " + dn,
	}
	ms, err := SettlementMovements(ctx, d, own, f.shop, d0, SettlementMovementLimit)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, line(m))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("movements:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ms[1].OrderPublicID == nil || ms[1].OrderStatus == nil || *ms[1].OrderStatus != "paid" {
		t.Errorf("a2's capture without its order or status: %+v", ms[1])
	}
	got = nil
	if err := EachSettlementMovement(ctx, d, own, f.shop, d0, func(m SettlementMovement) error {
		got = append(got, line(m))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("EachSettlementMovement:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ms, err := SettlementMovements(ctx, d, own, f.shop, d0, 2); err != nil || len(ms) != 2 {
		t.Errorf("limit 2: %d movements, %v", len(ms), err)
	}
	sums, err := SettlementMovementSums(ctx, d, own, f.shop, d0)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, s := range sums {
		got = append(got, fmt.Sprintf("%s %s %s %d %d", s.Part, s.Kind, s.Currency, s.Count, s.Amount))
	}
	wantSums := []string{"adjustment refund TRY 1 500", "late dispute TRY 1 9000", "own capture TRY 2 12202", "own refund TRY 1 1000"}
	if strings.Join(got, "\n") != strings.Join(wantSums, "\n") {
		t.Errorf("sums:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantSums, "\n"))
	}
}
