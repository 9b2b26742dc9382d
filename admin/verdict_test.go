package admin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
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
	ev := func(at time.Duration, kind string) report.EventRow {
		return report.EventRow{At: t0.Add(at), Kind: kind}
	}
	events := []report.EventRow{
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

// story is an order of a suspected double tap for pairVerdict: 45.00 TRY, one latte, paid
// by card, refunded as given.
func story(t *testing.T, id int64, at time.Time, key, brand, last4 string, refunded int64) orderStory {
	t.Helper()
	d := report.OrderDetail{OrderRow: report.OrderRow{ID: id, PublicID: fmt.Sprint(id), ClientID: 1, ClientName: "shop", Status: "paid",
		Amount: 4500, Currency: "TRY", Items: []byte(`[{"sku":"L","name":"Latte","quantity":1,"unit_amount":4500}]`),
		CustomerID: "cus_1", RefundedAmount: refunded, CreatedAt: at, Keys: []string{key},
		Payment: &report.PaymentRow{ChargeID: fmt.Sprint("ch_", id), Status: "succeeded", CardBrand: brand, CardLast4: last4}}}
	d.Keys = []report.OrderKey{{ClientID: 1, Key: key, FirstAt: at}}
	switch {
	case refunded >= d.Amount:
		d.Status = checkout.StatusRefunded
	case refunded > 0:
		d.Status = checkout.StatusPartiallyRefunded
	}
	arrival := report.EventRow{At: at, Kind: checkout.EventCreated, UserAgent: "app/1.0", RemoteAddr: "10.0.0.1"}
	return orderStory{d: d, arrival: &arrival}
}

// The advice on a suspected double tap follows what was refunded on both orders: with the
// first refunded in full, it said "refund the second order in full", and following it
// refunded the customer twice. Two cards are two payments, not one app sending one twice.
func TestPairVerdictAdvice(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name                   string
		refundedA, refundedB   int64
		brandB, last4B         string
		kind                   string
		want                   []string // in the advice
		notInAdvice, notInFact []string
	}{
		{name: "nothing refunded", kind: verdictTwice,
			want: []string{"refund the second order (2) in full"}},
		{name: "the first refunded in full", refundedA: 4500, kind: verdictTwice,
			want: []string{"45.00 TRY on order 1", "Nothing more to refund"}, notInAdvice: []string{"refund the second", "in full"}},
		{name: "the second refunded in full", refundedB: 4500, kind: verdictTwice,
			want: []string{"45.00 TRY on order 2", "Nothing more to refund"}, notInAdvice: []string{"refund the second"}},
		{name: "the first refunded in part", refundedA: 1000, kind: verdictTwice,
			want: []string{"10.00 TRY on order 1", "refund 35.00 TRY more", "from order 2"}, notInAdvice: []string{"in full"}},
		{name: "both refunded in part", refundedA: 1000, refundedB: 2000, kind: verdictTwice,
			want: []string{"10.00 TRY on order 1 and 20.00 TRY on order 2", "refund 15.00 TRY more", "from order 2"}},
		{name: "both refunded in full", refundedA: 4500, refundedB: 4500, kind: verdictTwice,
			want: []string{"45.00 TRY more than the charges beyond the first", "Do not refund again"}},
		{name: "another card", brandB: "mastercard", last4B: "4444", kind: verdictUnclear,
			want: []string{"ask the customer before refunding"}, notInAdvice: []string{"refund the second"},
			notInFact: []string{"one app sent the purchase twice"}},
		{name: "another card, the same last 4", brandB: "mastercard", last4B: "4242", kind: verdictUnclear,
			want: []string{"ask the customer before refunding"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brandB, last4B := "visa", "4242"
			if tt.brandB != "" {
				brandB, last4B = tt.brandB, tt.last4B
			}
			v := pairVerdict(story(t, 1, t0, "tap-1", "visa", "4242", tt.refundedA),
				story(t, 2, t0.Add(30*time.Second), "tap-2", brandB, last4B, tt.refundedB))
			advice, facts := strings.Join(v.Advice, "\n"), strings.Join(v.Facts, "\n")
			if v.Kind != tt.kind {
				t.Errorf("kind %s, want %s: %s", v.Kind, tt.kind, v.Headline)
			}
			for _, w := range tt.want {
				if !strings.Contains(advice, w) {
					t.Errorf("advice lacks %q:\n%s", w, advice)
				}
			}
			for _, w := range tt.notInAdvice {
				if strings.Contains(advice, w) {
					t.Errorf("advice says %q:\n%s", w, advice)
				}
			}
			for _, w := range tt.notInFact {
				if strings.Contains(facts, w) {
					t.Errorf("facts say %q:\n%s", w, facts)
				}
			}
		})
	}
}
