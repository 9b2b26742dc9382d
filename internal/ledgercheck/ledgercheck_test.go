package ledgercheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/proctest"
)

// TestHistoryChecker shows the checker failing on each fault it exists to catch, each on a
// small history written by hand, and passing on a history that keeps the promise: a
// checker that cannot fail proves nothing.
func TestHistoryChecker(t *testing.T) {
	// A clean history: a payment retried through a failover (a transport error, a 503, then
	// its 201 and a byte-identical replay), a declined payment replayed, and a refund.
	clean := func() ([]*Intent, Ledger, Store) {
		pay := &Intent{Kind: KindPay, Key: "p1", Amount: 10001, Token: "tok_visa", Answers: []proctest.Answer{
			{Err: "connection refused"}, problemAnswer(503, "store_unavailable"), paid("ord_1"), replayed(paid("ord_1")),
		}}
		declined := &Intent{Kind: KindPay, Key: "p2", Amount: 10002, Token: "tok_declined", Answers: []proctest.Answer{
			problemAnswer(402, "payment_declined"), replayed(problemAnswer(402, "payment_declined")),
		}}
		refund := &Intent{Kind: KindRefund, Key: "r1", Amount: 2500, Order: pay, OrderID: "ord_1", Answers: []proctest.Answer{
			problemAnswer(409, "idempotency_key_in_use"), refunded("rf_1"),
		}}
		l := Ledger{
			Charges: []Charge{
				{ID: "ch_1", Key: "k1", Description: "order ord_1", Amount: 10001, Status: "succeeded", Refunded: 2500},
				{ID: "ch_2", Key: "k2", Description: "order ord_2", Amount: 10002, Status: "declined"},
			},
			Refunds: []Refund{{ID: "re_1", Key: "rk1", ChargeID: "ch_1", Amount: 2500, Reason: RefundReason("r1")}},
		}
		s := Store{
			Orders:  map[string]string{"ord_1": "partially_refunded", "ord_2": "declined"},
			Refunds: map[string]string{"rf_1": "succeeded"},
		}
		return []*Intent{pay, declined, refund}, l, s
	}

	for _, tc := range []struct {
		name  string
		fault func(in []*Intent, l *Ledger, s *Store)
		count func(r Report) int
		finds string
	}{
		{"a clean history", func([]*Intent, *Ledger, *Store) {}, nil, ""},
		{"a payment charged twice (a lost row charged again under a new provider key)",
			func(_ []*Intent, l *Ledger, _ *Store) {
				l.Charges = append(l.Charges, Charge{ID: "ch_3", Key: "k1-again", Description: "order ord_9", Amount: 10001, Status: "succeeded"})
			}, func(r Report) int { return r.DoubleCharges }, "double charge: payment p1 (amount 10001) charged 2 times, 2 standing"},
		{"a payment charged twice by a key-less provider (a resumed order sent again under its reference)",
			func(_ []*Intent, l *Ledger, _ *Store) {
				l.Charges = append(l.Charges, Charge{ID: "ch_3", Key: "k1", Description: "order ord_1", Amount: 10001, Status: "succeeded"})
			}, func(r Report) int { return r.DoubleCharges }, "double charge: payment p1 (amount 10001) charged 2 times, 2 standing"},
		{"a payment charged twice, the second charge refunded in full",
			func(_ []*Intent, l *Ledger, _ *Store) {
				l.Charges = append(l.Charges, Charge{ID: "ch_3", Key: "k1-again", Description: "order ord_9", Amount: 10001, Status: "succeeded", Refunded: 10001})
			}, func(r Report) int { return r.CompensatedDoubleCharges }, "double charge refunded by compensation: payment p1"},
		{"a declined charge beside the charge is not a double charge",
			func(_ []*Intent, l *Ledger, _ *Store) {
				l.Charges = append(l.Charges, Charge{ID: "ch_3", Key: "k1-again", Amount: 10001, Status: "declined"})
			}, nil, ""},
		{"a refund made twice at the provider",
			func(_ []*Intent, l *Ledger, _ *Store) {
				l.Refunds = append(l.Refunds, Refund{ID: "re_2", Key: "rk2", ChargeID: "ch_1", Amount: 2500, Reason: RefundReason("r1")})
			}, func(r Report) int { return r.DoubleRefunds }, "double refund: refund r1 of order ord_1 refunded 2 times"},
		{"an acknowledged order absent after the failover",
			func(_ []*Intent, _ *Ledger, s *Store) { delete(s.Orders, "ord_1") },
			func(r Report) int { return r.LostPayments }, `acknowledged payment lost: payment p1 was told 201 with order "ord_1", which is absent`},
		{"an acknowledged order no longer paid",
			func(_ []*Intent, _ *Ledger, s *Store) { s.Orders["ord_1"] = "canceled" },
			func(r Report) int { return r.LostPayments }, "which is canceled after the run"},
		{"an acknowledged refund absent after the failover",
			func(_ []*Intent, _ *Ledger, s *Store) { delete(s.Refunds, "rf_1") },
			func(r Report) int { return r.LostRefunds }, `acknowledged refund lost: refund r1 was told 201 with refund "rf_1", which is absent`},
		{"a replay whose body differs (a new order for a lost one)",
			func(in []*Intent, _ *Ledger, _ *Store) {
				in[0].Answers = append(in[0].Answers, replayed(paid("ord_2")))
			}, func(r Report) int { return r.ReplaysDiffer }, "replay not byte-identical: pay p1"},
		{"a replay whose status differs",
			func(in []*Intent, _ *Ledger, _ *Store) {
				in[1].Answers = append(in[1].Answers, problemAnswer(409, "payment_abandoned"))
			}, func(r Report) int { return r.ReplaysDiffer }, "replay not byte-identical: pay p2: 402"},
		{"a key left in progress",
			func(_ []*Intent, _ *Ledger, s *Store) { s.InProgress = []string{"p3"} },
			func(r Report) int { return r.InProgress }, "key in progress: 1 keys, the first [p3]"},
		{"a charge of no payment",
			func(_ []*Intent, l *Ledger, _ *Store) {
				l.Charges = append(l.Charges, Charge{ID: "ch_9", Amount: 777, Status: "succeeded"})
			}, func(r Report) int { return r.UnmatchedCharges }, "unmatched charge: ch_9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, l, s := clean()
			tc.fault(in, &l, &s)
			r := Check(in, l, s)
			answers := 0
			for _, i := range in {
				answers += len(i.Answers)
			}
			if r.Payments != 2 || r.Refunds != 1 || r.Answers != answers || r.Acknowledged != 2 {
				t.Errorf("figures: %v", r)
			}
			if tc.count == nil {
				if !r.Clean() || len(r.Findings) > 0 {
					t.Fatalf("a history that keeps the promise is reported as a fault: %v\n%s", r, strings.Join(r.Findings, "\n"))
				}
				return
			}
			if r.Clean() {
				t.Fatalf("the fault is not caught: %v", r)
			}
			if n := tc.count(r); n != 1 {
				t.Errorf("the fault is counted %d times, want once: %v", n, r)
			}
			if len(r.Findings) != 1 || !strings.Contains(r.Findings[0], tc.finds) {
				t.Errorf("findings %q, want one containing %q", r.Findings, tc.finds)
			}
		})
	}
}

func paid(orderID string) proctest.Answer {
	return proctest.Answer{Status: 201, Body: fmt.Appendf(nil, `{"id":%q,"status":"paid","amount":10001}`, orderID), Replayed: "false"}
}

func refunded(refundID string) proctest.Answer {
	return proctest.Answer{Status: 201, Body: fmt.Appendf(nil, `{"id":%q,"order_id":"ord_1","amount":2500,"status":"succeeded"}`, refundID), Replayed: "false"}
}

func problemAnswer(status int, code string) proctest.Answer {
	return proctest.Answer{Status: status, Code: code, Body: fmt.Appendf(nil, `{"status":%d,"code":%q}`, status, code)}
}

func replayed(a proctest.Answer) proctest.Answer {
	a.Replayed = "true"
	return a
}

// TestLedgerOfAGroup: a group of clients is checked against its own part of the ledger, so
// that another group's charges are neither its double charges nor charges of no payment.
func TestLedgerOfAGroup(t *testing.T) {
	pay := &Intent{Kind: KindPay, Key: "a1", Amount: 10001, Answers: []proctest.Answer{paid("ord_1")}}
	refund := &Intent{Kind: KindRefund, Key: "a1-refund", Amount: 2500, Order: pay, OrderID: "ord_1", Answers: []proctest.Answer{refunded("rf_1")}}
	l := Ledger{
		Charges: []Charge{
			{ID: "ch_1", Amount: 10001, Status: "succeeded", Refunded: 2500},
			{ID: "ch_2", Amount: 10002, Status: "succeeded"}, // another group's, charged twice
			{ID: "ch_3", Amount: 10002, Status: "succeeded"},
		},
		Refunds: []Refund{
			{ID: "re_1", ChargeID: "ch_1", Amount: 2500, Reason: RefundReason("a1-refund")},
			{ID: "re_2", ChargeID: "ch_2", Amount: 2500, Reason: RefundReason("b1-refund")},
		},
	}
	mine := []*Intent{pay, refund}
	part := l.Of(mine)
	if len(part.Charges) != 1 || part.Charges[0].ID != "ch_1" || len(part.Refunds) != 1 || part.Refunds[0].ID != "re_1" {
		t.Fatalf("the group's ledger: %+v", part)
	}
	s := Store{Orders: map[string]string{"ord_1": "partially_refunded"}, Refunds: map[string]string{"rf_1": "succeeded"}}
	if r := Check(mine, part, s); !r.Clean() {
		t.Errorf("the group is blamed for another's charges: %v", r)
	}
	if r := Check(mine, l, s); r.UnmatchedCharges != 2 {
		t.Errorf("the whole ledger against one group: %v, want the other group's 2 charges unmatched", r)
	}
}
