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
	ev := func(at time.Duration, kind string) report.HistoryRow {
		return report.HistoryRow{At: t0.Add(at), Kind: kind}
	}
	events := []report.HistoryRow{
		ev(-40*24*time.Hour, checkout.KindCreated), ev(-40*24*time.Hour+time.Minute, checkout.KindReplayed),
		ev(0, checkout.KindCreated), ev(0, checkout.KindCompleted), ev(time.Minute, checkout.KindReplayed),
		ev(50*24*time.Hour, checkout.KindCreated), ev(50*24*time.Hour, checkout.KindReplayed),
	}
	got := incarnation(events, t0.Add(-time.Millisecond))
	if len(got) != 3 || !got[0].At.Equal(t0) || got[2].Kind != checkout.KindReplayed {
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
	arrival := report.HistoryRow{At: at, Kind: checkout.KindCreated, UserAgent: "app/1.0", RemoteAddr: "10.0.0.1"}
	charges := report.OrderCharges{Installments: 1, Charges: []report.Charge{{OrderID: id, ChargeID: d.Payment.ChargeID, Amount: d.Amount, At: at}}}
	return orderStory{d: d, charges: charges, arrival: &arrival}
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
				story(t, 2, t0.Add(30*time.Second), "tap-2", brandB, last4B, tt.refundedB), nil)
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

// tap is an order of a suspected double tap for adviseTap: price amount, charged the
// given amounts (installments of a plan of plan, when plan > 1), refunded as given.
func tap(id string, amount int64, plan int, refunded int64, charges ...int64) tapOrder {
	o := tapOrder{PublicID: id, Amount: amount, Currency: "TRY", Refunded: refunded, Charged: report.OrderCharges{Installments: plan}}
	for i, c := range charges {
		n := 0
		if plan > 1 {
			n = i + 1
		}
		o.Charged.Charges = append(o.Charged.Charges, report.Charge{N: n, ChargeID: fmt.Sprintf("ch_%s%d", id, i+1), Amount: c})
	}
	return o
}

// adviseTap is the one source of "charged how often, and what is left to refund": the
// verdict, the pair page and the refund form all read it. The customer is to pay for one
// purchase once, whatever was refunded where; an installment charges its own amount.
func TestAdviseTap(t *testing.T) {
	type form struct {
		order   string
		prefill int64
		warns   []string // "" in the list: no warning
		confirm bool
	}
	tests := []struct {
		name    string
		group   []tapOrder
		times   string
		left    int64
		steps   []refundStep
		advice  []string
		notIn   []string
		charges map[string]string
		forms   []form
	}{
		{name: "double tap, nothing refunded", group: []tapOrder{tap("A", 2000, 1, 0, 2000), tap("B", 2000, 1, 0, 2000)},
			times: "twice", left: 2000, steps: []refundStep{{"B", 2000, true}},
			advice:  []string{"refund the second order (B) in full"},
			charges: map[string]string{"A": "charge ch_A1 of 20.00 TRY"},
			forms:   []form{{"B", 2000, []string{""}, false}, {"A", 2000, []string{""}, false}}},
		{name: "the first refunded in part", group: []tapOrder{tap("A", 2000, 1, 1000, 2000), tap("B", 2000, 1, 0, 2000)},
			times: "twice", left: 1000, steps: []refundStep{{"B", 1000, false}},
			advice: []string{"10.00 TRY on order A", "refund 10.00 TRY more (not a full refund), from order B"},
			notIn:  []string{"in full"},
			forms: []form{
				{"B", 1000, []string{"Refunded already: order A, in part (10.00 TRY of the 20.00 TRY charged)", "10.00 TRY is left to refund, not this order's 20.00 TRY", "type this order's id (B)"}, true},
				{"A", 1000, []string{""}, false}}},
		{name: "the first refunded in full", group: []tapOrder{tap("A", 2000, 1, 2000, 2000), tap("B", 2000, 1, 0, 2000)},
			times: "twice", left: 0,
			advice: []string{"20.00 TRY on order A", "Nothing more to refund"},
			forms:  []form{{"B", 0, []string{"Refunded already: order A, in full (20.00 TRY)", "nothing is left to refund", "twice"}, true}}},
		{name: "both refunded in full", group: []tapOrder{tap("A", 2000, 1, 2000, 2000), tap("B", 2000, 1, 2000, 2000)},
			times: "twice", left: -2000, advice: []string{"20.00 TRY more than the charges beyond the first", "Do not refund again"}},
		{name: "triple tap, nothing refunded", group: []tapOrder{tap("A", 2000, 1, 0, 2000), tap("B", 2000, 1, 0, 2000), tap("C", 2000, 1, 0, 2000)},
			times: "3 times", left: 4000, steps: []refundStep{{"B", 2000, true}, {"C", 2000, true}},
			advice: []string{"refund every order but the first in full (B, C)"},
			forms:  []form{{"C", 2000, []string{""}, false}}},
		{name: "triple tap, the first refunded in full", group: []tapOrder{tap("A", 2000, 1, 2000, 2000), tap("B", 2000, 1, 0, 2000), tap("C", 2000, 1, 0, 2000)},
			times: "3 times", left: 2000, steps: []refundStep{{"C", 2000, true}},
			advice: []string{"refund order C in full (20.00 TRY)"},
			forms:  []form{{"B", 2000, []string{"Refunded already: order A", "charged 3 times", "20.00 TRY is left to refund over these orders"}, false}}},
		{name: "triple tap, refunded in part on two", group: []tapOrder{tap("A", 2000, 1, 500, 2000), tap("B", 2000, 1, 0, 2000), tap("C", 2000, 1, 1500, 2000)},
			times: "3 times", left: 2000, steps: []refundStep{{"B", 1500, false}, {"C", 500, true}},
			advice: []string{"refund 20.00 TRY more in all: 15.00 TRY from order B and 5.00 TRY from order C, all that is left of it"},
			forms:  []form{{"C", 500, []string{"double tap of order A and order B: the same customer, amount, items and card, under other keys", "Refunded already: order A, in part (5.00 TRY of the 20.00 TRY charged). To"}, false}}},
		{name: "installments, one paid on each", group: []tapOrder{tap("A", 450000, 3, 0, 150000), tap("B", 450000, 3, 0, 150000)},
			times: "twice", left: 150000, steps: []refundStep{{"B", 150000, true}},
			advice:  []string{"refund the second order (B) in full"},
			charges: map[string]string{"B": "1 of its 3 installments charged: charge ch_B1 of 1500.00 TRY, 1500.00 TRY of 4500.00 TRY so far"},
			forms:   []form{{"B", 150000, []string{""}, false}}},
		{name: "installments, two paid on one and one on the other", group: []tapOrder{tap("A", 450000, 3, 0, 150000, 150000), tap("B", 450000, 3, 0, 150000)},
			times: "twice", left: 150000, steps: []refundStep{{"B", 150000, true}},
			advice: []string{"refund the second order (B) in full"},
			forms: []form{{"A", 0, []string{"not from this order: it is the one to keep", "Refund order B instead"}, true},
				{"B", 150000, []string{""}, false}}},
		{name: "installments, two paid on each", group: []tapOrder{tap("A", 450000, 3, 0, 150000, 150000), tap("B", 450000, 3, 0, 150000, 150000)},
			times: "twice", left: 300000, steps: []refundStep{{"B", 150000, false}},
			advice: []string{"refund 1500.00 TRY more (not a full refund), from order B",
				"1500.00 TRY of the charges beyond one purchase cannot be refunded here", "at the payment provider"},
			notIn: []string{"in full"},
			forms: []form{{"B", 150000, []string{""}, false}}},
		{name: "one order in installments, two of three paid", group: []tapOrder{tap("A", 450000, 3, 0, 150000, 150000)},
			times: "once", left: 0,
			charges: map[string]string{"A": "2 of its 3 installments charged: charge ch_A1 of 1500.00 TRY and charge ch_A2 of 1500.00 TRY, 3000.00 TRY of 4500.00 TRY so far"},
			forms:   []form{{"A", 150000, []string{""}, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := adviseTap(tt.group)
			if a.Times != tt.times || a.Left != tt.left {
				t.Errorf("charged %s, %d left; want %s, %d", a.Times, a.Left, tt.times, tt.left)
			}
			if fmt.Sprint(a.Steps) != fmt.Sprint(tt.steps) {
				t.Errorf("steps %v, want %v", a.Steps, tt.steps)
			}
			advice := strings.Join(a.Advice, "\n")
			if len(tt.advice) == 0 && advice != "" {
				t.Errorf("advice %q, want none", advice)
			}
			for _, w := range tt.advice {
				if !strings.Contains(advice, w) {
					t.Errorf("advice lacks %q:\n%s", w, advice)
				}
			}
			for _, w := range tt.notIn {
				if strings.Contains(advice, w) {
					t.Errorf("advice says %q:\n%s", w, advice)
				}
			}
			for id, w := range tt.charges {
				if a.Charges[id] != w {
					t.Errorf("charges of %s: %q, want %q", id, a.Charges[id], w)
				}
			}
			for _, f := range tt.forms {
				prefill, warning, confirm := a.refundForm(f.order)
				if prefill != f.prefill || confirm != f.confirm {
					t.Errorf("form of %s: prefill %d confirm %v, want %d %v (%s)", f.order, prefill, confirm, f.prefill, f.confirm, warning)
				}
				for _, w := range f.warns {
					if w == "" && warning != "" || !strings.Contains(warning, w) {
						t.Errorf("form of %s warns %q, want %q", f.order, warning, w)
					}
				}
			}
		})
	}
}
