package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// The disputes queue pages through both its parts, the open disputes (oldest first) and the
// decided ones (latest decision first), with one cursor: every page size gives the whole
// list once, in order, whichever part a page ends in.
func TestDisputesQueuePages(t *testing.T) {
	d := dbtest.New(t)
	f := seedConsole(t, d)
	var orders []int64
	if err := d.Select(&orders, `SELECT id FROM orders ORDER BY id LIMIT 5`); err != nil || len(orders) < 5 {
		t.Fatalf("%d orders: %v", len(orders), err)
	}
	for i, dp := range []struct {
		id       string
		status   string
		opened   time.Duration // before at0
		closedAt time.Duration // before at0, when decided
	}{
		{"dp_b", "open", 2 * time.Hour, 0},
		{"dp_lost", "lost", 9 * time.Hour, 3 * time.Hour},
		{"dp_a", "open", 3 * time.Hour, 0},
		{"dp_won", "won", 8 * time.Hour, time.Hour},
		{"dp_c", "open", 2 * time.Hour, 0}, // opened with dp_b: the id breaks the tie
	} {
		var closed *time.Time
		if dp.status != "open" {
			c := at0.Add(-dp.closedAt)
			closed = &c
		}
		f.exec(`INSERT INTO order_disputes (order_id, provider, dispute_id, amount, reason, status, opened_at, closed_at)
			VALUES ($1, 'psp', $2, 100, 'r', $3, $4, $5)`, orders[i], dp.id, dp.status, at0.Add(-dp.opened), closed)
	}
	want := map[string]string{
		"":     "dp_a dp_b dp_c",
		"open": "dp_a dp_b dp_c",
		"won":  "dp_won",
		"lost": "dp_lost",
		"all":  "dp_a dp_b dp_c dp_won dp_lost",
	}
	for status, w := range want {
		for limit := 1; limit <= 6; limit++ {
			var got []string
			page := Page{Limit: limit}
			for n := 0; ; n++ {
				rows, next, err := ListDisputes(context.Background(), d, DisputeFilter{Status: status}, page)
				if err != nil {
					t.Fatalf("%q limit %d: %v", status, limit, err)
				}
				if len(rows) > limit || n > 10 {
					t.Fatalf("%q limit %d: a page of %d rows, page %d", status, limit, len(rows), n)
				}
				for _, r := range rows {
					got = append(got, r.DisputeID)
				}
				if next.After == "" {
					break
				}
				page = next
			}
			if strings.Join(got, " ") != w {
				t.Errorf("%q limit %d: %v, want %s", status, limit, got, w)
			}
		}
	}
}
