// Package ledgercheck checks what clients were answered against the provider's ledger and
// tekrar's store after a harness's run: from what each client was told, the provider's
// ledger and tekrar's database, it counts what the promise forbids (a payment charged
// twice, an acknowledged answer that no longer holds, a replay that is not the first answer
// byte for byte, a key left in progress). It reads no log and trusts no counter of
// tekrar's: only the clients' own record, the provider's record, and what tekrar's database
// holds once every fault is over. The failover harness (cmd/tekrar/failover) and the crash
// harness (cmd/tekrar) both check their runs with it.
//
// The checker is a function of plain values (Check), so that each fault it must catch is
// shown caught on a small history written by hand (TestHistoryChecker); a harness reads the
// values with ReadLedger and ReadStore.
package ledgercheck

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/proctest"
)

// Kind is what an intent asks for: a payment (POST /v1/orders) or a refund of its order.
type Kind string

const (
	KindPay    Kind = "pay"
	KindRefund Kind = "refund"
)

// Intent is one thing a client wanted done once, under one Idempotency-Key, with
// every answer it got, in order.
type Intent struct {
	Kind Kind
	Key  string
	// Amount is what is charged or refunded. A payment's amount is its own in the run: the
	// provider's ledger does not know tekrar's keys, and a charge made for a lost row
	// names an order the database no longer has, so the amount is what ties a charge to
	// the intent it was made for.
	Amount int64
	Token  string  // a payment's card
	Order  *Intent // a refund's payment
	// OrderID is the public id of the order a refund refunds: the id its payment's 201 named.
	OrderID string
	Answers []proctest.Answer
}

// RefundReason is the reason a refund intent sends, which the provider keeps on its
// refund: what ties a refund in the ledger to the intent it was made for.
func RefundReason(key string) string { return "history " + key }

// Outcome reports whether a is an answer a client stops on: an HTTP answer that retrying
// with the same key cannot change.
func Outcome(a proctest.Answer) bool { return a.Err == "" && !retryAgain(a) }

// retryAgain reports whether a client sends the same key again after a: no answer, a
// server or store failure, the key in use by another attempt, an installment in flight.
func retryAgain(a proctest.Answer) bool {
	return a.Err != "" || a.Status >= 500 || a.Code == "idempotency_key_in_use" || a.Code == "installment_in_flight"
}

// Charge and Refund are the provider's record, read from its own database.
type Charge struct {
	ID          string `db:"id"`
	Key         string `db:"key"`
	Description string `db:"description"`
	Amount      int64  `db:"amount"`
	Status      string `db:"status"`
	Refunded    int64  `db:"refunded_amount"`
}

// Refund is a refund in the provider's record; its Reason names the intent (RefundReason).
type Refund struct {
	ID       string `db:"id"`
	Key      string `db:"key"`
	ChargeID string `db:"charge_id"`
	Amount   int64  `db:"amount"`
	Reason   string `db:"reason"`
}

// Ledger is the provider's record of a run: every charge not canceled, every refund.
type Ledger struct {
	Charges []Charge
	Refunds []Refund
}

// Of is the part of l made for intents: the charges of their payments' amounts and the
// refunds of their refunds' reasons.
func (l Ledger) Of(intents []*Intent) Ledger {
	amounts, reasons := map[int64]bool{}, map[string]bool{}
	for _, in := range intents {
		switch in.Kind {
		case KindPay:
			amounts[in.Amount] = true
		case KindRefund:
			reasons[RefundReason(in.Key)] = true
		}
	}
	var out Ledger
	for _, c := range l.Charges {
		if amounts[c.Amount] {
			out.Charges = append(out.Charges, c)
		}
	}
	for _, rf := range l.Refunds {
		if reasons[rf.Reason] {
			out.Refunds = append(out.Refunds, rf)
		}
	}
	return out
}

// ReadLedger reads the provider's charges (a canceled key holds no charge and is left out)
// and refunds.
func ReadLedger(ctx context.Context, db *sqlx.DB) (Ledger, error) {
	var l Ledger
	if err := db.SelectContext(ctx, &l.Charges, `
		SELECT id, key, description, amount, status, refunded_amount
		  FROM psp_charges WHERE status <> 'canceled' ORDER BY seq`); err != nil {
		return l, fmt.Errorf("read the provider's charges: %w", err)
	}
	if err := db.SelectContext(ctx, &l.Refunds, `
		SELECT id, key, charge_id, amount, reason FROM psp_refunds ORDER BY seq`); err != nil {
		return l, fmt.Errorf("read the provider's refunds: %w", err)
	}
	return l, nil
}

// Store is what tekrar's database holds after the run.
type Store struct {
	Orders     map[string]string // public id: status
	Refunds    map[string]string // public id: status
	InProgress []string          // keys still in progress
	Attention  []string          // keys handed to an operator
}

// ReadStore reads tekrar's orders and refunds by public id, and its keys left in progress
// or handed to an operator.
func ReadStore(ctx context.Context, db *sqlx.DB) (Store, error) {
	s := Store{Orders: map[string]string{}, Refunds: map[string]string{}}
	type row struct {
		ID     string `db:"public_id"`
		Status string `db:"status"`
	}
	for _, q := range []struct {
		query string
		into  map[string]string
	}{
		{`SELECT public_id, status FROM orders`, s.Orders},
		{`SELECT public_id, status FROM refunds`, s.Refunds},
	} {
		var rows []row
		if err := db.SelectContext(ctx, &rows, q.query); err != nil {
			return s, fmt.Errorf("read tekrar's orders and refunds: %w", err)
		}
		for _, r := range rows {
			q.into[r.ID] = r.Status
		}
	}
	if err := db.SelectContext(ctx, &s.InProgress, `SELECT key FROM idempotency_keys WHERE state = 'in_progress' ORDER BY key`); err != nil {
		return s, fmt.Errorf("read the keys in progress: %w", err)
	}
	if err := db.SelectContext(ctx, &s.Attention, `SELECT key FROM idempotency_keys WHERE state = 'needs_attention' ORDER BY key`); err != nil {
		return s, fmt.Errorf("read the keys needing attention: %w", err)
	}
	return s, nil
}

// Report is the checker's finding. A harness fails unless every count of a fault is zero
// (Clean); the failover harness's control run, which loses rows on purpose under the old
// provider keys, asserts that DoubleCharges (or CompensatedDoubleCharges) is not.
type Report struct {
	Payments, Refunds int
	Answers, Replays  int // every answer received; those marked Idempotent-Replayed: true
	Acknowledged      int // intents that received a 201

	// Faults.
	DoubleCharges int // payments charged more than once at the provider, two or more charges standing
	// CompensatedDoubleCharges: payments charged more than once, every extra charge since
	// refunded in full by tekrar (a compensation or reconciliation): the customer still saw
	// two charges, so it counts as a fault, apart.
	CompensatedDoubleCharges int
	DoubleRefunds            int // refund intents refunded more than once at the provider
	LostPayments             int // a 201 received whose order is absent, or not paid, after the run
	LostRefunds              int // a 201 received whose refund is absent, or not succeeded
	ReplaysDiffer            int // intents with two outcomes that differ in status or body
	InProgress               int // keys still in progress

	Attention        int // keys handed to an operator (not a fault: an operator decides)
	UnmatchedCharges int // succeeded charges of no intent's amount (a charge the run cannot place)

	Findings []string // what each fault is, the first few of each kind
}

// Clean reports whether the history keeps the promise.
func (r Report) Clean() bool {
	return r.DoubleCharges == 0 && r.CompensatedDoubleCharges == 0 && r.DoubleRefunds == 0 &&
		r.LostPayments == 0 && r.LostRefunds == 0 && r.ReplaysDiffer == 0 && r.InProgress == 0 &&
		r.UnmatchedCharges == 0
}

func (r Report) String() string {
	return fmt.Sprintf("payments %d, refunds %d, answers %d (replays %d), acknowledged %d; "+
		"double charges %d (and %d refunded by compensation), double refunds %d, "+
		"lost acknowledged answers %d (payments %d, refunds %d), replays not byte-identical %d, "+
		"keys in progress %d, unmatched charges %d, keys needing attention %d",
		r.Payments, r.Refunds, r.Answers, r.Replays, r.Acknowledged,
		r.DoubleCharges, r.CompensatedDoubleCharges, r.DoubleRefunds,
		r.LostPayments+r.LostRefunds, r.LostPayments, r.LostRefunds, r.ReplaysDiffer,
		r.InProgress, r.UnmatchedCharges, r.Attention)
}

// Check compares what the clients were told with the provider's ledger and tekrar's
// database after the run.
func Check(intents []*Intent, l Ledger, s Store) Report {
	var r Report
	shown := map[string]int{}
	find := func(kind, format string, args ...any) {
		if shown[kind]++; shown[kind] <= 5 {
			r.Findings = append(r.Findings, kind+": "+fmt.Sprintf(format, args...))
		}
	}

	charges := map[int64][]Charge{} // succeeded charges by amount
	for _, c := range l.Charges {
		if c.Status == "succeeded" {
			charges[c.Amount] = append(charges[c.Amount], c)
		}
	}
	refunds := map[string][]Refund{} // refunds by reason
	for _, rf := range l.Refunds {
		refunds[rf.Reason] = append(refunds[rf.Reason], rf)
	}

	placed := map[int64]bool{}
	for _, in := range intents {
		r.Answers += len(in.Answers)
		for _, a := range in.Answers {
			if a.Replayed == "true" {
				r.Replays++
			}
		}
		ack := acknowledged(in.Answers)
		if ack != nil {
			r.Acknowledged++
		}
		if first, other := proctest.Disagreement(in.Answers, Outcome); other != nil {
			r.ReplaysDiffer++
			find("replay not byte-identical", "%s %s: %d %s, then %d %s", in.Kind, in.Key, first.Status, first.Body, other.Status, other.Body)
		}
		switch in.Kind {
		case KindPay:
			r.Payments++
			placed[in.Amount] = true
			var standing []string
			var all []string
			for _, c := range charges[in.Amount] {
				all = append(all, c.ID)
				if c.Refunded < c.Amount {
					standing = append(standing, c.ID)
				}
			}
			switch {
			case len(standing) > 1:
				r.DoubleCharges++
				find("double charge", "payment %s (amount %d) charged %d times, %d standing: %v", in.Key, in.Amount, len(all), len(standing), describeCharges(charges[in.Amount]))
			case len(all) > 1:
				r.CompensatedDoubleCharges++
				find("double charge refunded by compensation", "payment %s (amount %d) charged %d times: %v", in.Key, in.Amount, len(all), describeCharges(charges[in.Amount]))
			}
			if ack != nil {
				id := PublicID(ack.Body)
				if st, ok := s.Orders[id]; !ok || !paidStatus(st) {
					r.LostPayments++
					find("acknowledged payment lost", "payment %s was told 201 with order %q, which is %s after the run", in.Key, id, orNone(st, ok))
				}
			}
		case KindRefund:
			r.Refunds++
			if n := len(refunds[RefundReason(in.Key)]); n > 1 {
				r.DoubleRefunds++
				find("double refund", "refund %s of order %s refunded %d times at the provider", in.Key, in.OrderID, n)
			}
			if ack != nil {
				id := PublicID(ack.Body)
				if st, ok := s.Refunds[id]; !ok || st != "succeeded" {
					r.LostRefunds++
					find("acknowledged refund lost", "refund %s was told 201 with refund %q, which is %s after the run", in.Key, id, orNone(st, ok))
				}
			}
		}
	}
	for amount, cs := range charges {
		if !placed[amount] {
			r.UnmatchedCharges += len(cs)
			find("unmatched charge", "%v: no payment of amount %d", describeCharges(cs), amount)
		}
	}
	r.InProgress = len(s.InProgress)
	if len(s.InProgress) > 0 {
		find("key in progress", "%d keys, the first %v", len(s.InProgress), s.InProgress[:min(5, len(s.InProgress))])
	}
	r.Attention = len(s.Attention)
	slices.Sort(r.Findings)
	return r
}

// acknowledged is the first 201 in answers, or nil.
func acknowledged(answers []proctest.Answer) *proctest.Answer {
	for i := range answers {
		if answers[i].Err == "" && answers[i].Status == 201 {
			return &answers[i]
		}
	}
	return nil
}

func paidStatus(status string) bool {
	return status == "paid" || status == "partially_refunded" || status == "refunded"
}

// PublicID is the public id an answer's body names: an order's in a payment's 201, a
// refund's in a refund's.
func PublicID(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &v)
	return v.ID
}

func orNone(status string, ok bool) string {
	if !ok {
		return "absent"
	}
	return status
}

func describeCharges(cs []Charge) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %q refunded %d/%d", c.ID, c.Description, c.Refunded, c.Amount))
	}
	return strings.Join(parts, "; ")
}
