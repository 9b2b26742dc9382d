package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/problem"
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := clients.Location(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// utc reads an RFC 3339 instant of a test's calendar (fractions allowed).
func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestInstallmentSchedule: due dates keep the order's day of the month, or the month's last
// day when it is shorter (never drifting after a short month), in the client's zone; each is
// due when that day starts there, across daylight-saving changes.
func TestInstallmentSchedule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		zone    string
		created string
		count   int
		dueOn   []string
		dueAt   []string // when each day starts, UTC; only checked when given
	}{
		{"month ends", "UTC", "2027-01-31T10:00:00Z", 4,
			[]string{"2027-01-31", "2027-02-28", "2027-03-31", "2027-04-30"},
			[]string{"2027-01-31T00:00:00Z", "2027-02-28T00:00:00Z", "2027-03-31T00:00:00Z", "2027-04-30T00:00:00Z"}},
		{"leap year february", "UTC", "2028-01-30T10:00:00Z", 3,
			[]string{"2028-01-30", "2028-02-29", "2028-03-30"}, nil},
		{"29 February", "UTC", "2028-02-29T10:00:00Z", 12,
			[]string{"2028-02-29", "2028-03-29", "2028-04-29", "2028-05-29", "2028-06-29", "2028-07-29",
				"2028-08-29", "2028-09-29", "2028-10-29", "2028-11-29", "2028-12-29", "2029-01-29"}, nil},
		{"the 28th stays the 28th", "UTC", "2027-02-28T10:00:00Z", 2,
			[]string{"2027-02-28", "2027-03-28"}, nil},
		{"across a year end", "UTC", "2027-12-31T10:00:00Z", 3,
			[]string{"2027-12-31", "2028-01-31", "2028-02-29"}, nil},
		// 21:30 UTC on Jan 31 is 00:30 on Feb 1 in Istanbul (UTC+3): the plan counts from Feb 1,
		// and each day starts at 21:00 UTC the evening before.
		{"Istanbul's day ends at 21:00 UTC", "Europe/Istanbul", "2027-01-31T21:30:00Z", 3,
			[]string{"2027-02-01", "2027-03-01", "2027-04-01"},
			[]string{"2027-01-31T21:00:00Z", "2027-02-28T21:00:00Z", "2027-03-31T21:00:00Z"}},
		{"Istanbul, just before its midnight", "Europe/Istanbul", "2027-01-31T20:59:59Z", 2,
			[]string{"2027-01-31", "2027-02-28"},
			[]string{"2027-01-30T21:00:00Z", "2027-02-27T21:00:00Z"}},
		// Berlin moves to summer time on 2027-03-28: March's midnight is 23:00 UTC, April's 22:00.
		{"Berlin into summer time", "Europe/Berlin", "2027-02-15T12:00:00Z", 3,
			[]string{"2027-02-15", "2027-03-15", "2027-04-15"},
			[]string{"2027-02-14T23:00:00Z", "2027-03-14T23:00:00Z", "2027-04-14T22:00:00Z"}},
		// New York leaves summer time on 2027-11-07: midnight moves from 04:00 to 05:00 UTC.
		{"New York out of summer time", "America/New_York", "2027-10-07T15:00:00Z", 3,
			[]string{"2027-10-07", "2027-11-07", "2027-12-07"},
			[]string{"2027-10-07T04:00:00Z", "2027-11-07T04:00:00Z", "2027-12-07T05:00:00Z"}},
		// The day of the change itself: New York's 2027-03-14 starts at 05:00 UTC (EST), the
		// 15th at 04:00 UTC (EDT).
		{"New York into summer time", "America/New_York", "2027-02-14T15:00:00Z", 2,
			[]string{"2027-02-14", "2027-03-14"},
			[]string{"2027-02-14T05:00:00Z", "2027-03-14T05:00:00Z"}},
		// Havana's clocks skip midnight on 2026-03-08 (00:00 is 01:00 CDT): that day begins,
		// and its installment is due, at 01:00, 05:00 UTC; the 8th of April at its midnight,
		// 04:00 UTC.
		{"Havana skips its midnight", "America/Havana", "2026-02-08T15:00:00Z", 3,
			[]string{"2026-02-08", "2026-03-08", "2026-04-08"},
			[]string{"2026-02-08T05:00:00Z", "2026-03-08T05:00:00Z", "2026-04-08T04:00:00Z"}},
		// Havana's clocks repeat midnight on 2026-11-01 (01:00 CDT is 00:00 CST): the day
		// begins at the first 00:00, 04:00 UTC.
		{"Havana repeats its midnight", "America/Havana", "2026-10-01T15:00:00Z", 2,
			[]string{"2026-10-01", "2026-11-01"},
			[]string{"2026-10-01T04:00:00Z", "2026-11-01T04:00:00Z"}},
		// Amman repeated its midnight on 2016-10-28, east of UTC, where time.Date picks the
		// second 00:00 (22:00 UTC): the installment is due at the first, 21:00 UTC.
		{"Amman repeats its midnight", "Asia/Amman", "2016-09-28T12:00:00Z", 2,
			[]string{"2016-09-28", "2016-10-28"},
			[]string{"2016-09-27T21:00:00Z", "2016-10-27T21:00:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := planInstallments(int64(100*tc.count+1), tc.count, utc(tc.created), mustLoad(t, tc.zone))
			if len(plan) != tc.count {
				t.Fatalf("%d installments, want %d", len(plan), tc.count)
			}
			for i, p := range plan {
				if p.N != i+1 || p.DueOn.String() != tc.dueOn[i] {
					t.Errorf("installment %d: #%d due %s, want %s", i+1, p.N, p.DueOn, tc.dueOn[i])
				}
				if tc.dueAt != nil && !p.DueAt.Equal(utc(tc.dueAt[i])) {
					t.Errorf("installment %d: due at %s, want %s", i+1, p.DueAt.UTC().Format(time.RFC3339), tc.dueAt[i])
				}
			}
		})
	}
}

// TestInstallmentAmounts: integer minor units that add up to the total, the remainder on the
// first installment.
func TestInstallmentAmounts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		total int64
		count int
		want  []int64
	}{
		{1000, 3, []int64{334, 333, 333}},
		{1200, 12, []int64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100}},
		{2, 2, []int64{1, 1}},
		{13, 12, []int64{2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{MaxAmount, 7, []int64{142857142858, 142857142857, 142857142857, 142857142857, 142857142857, 142857142857, 142857142857}},
	}
	for _, tc := range cases {
		got := splitAmount(tc.total, tc.count)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%d in %d: %v, want %v", tc.total, tc.count, got, tc.want)
		}
		var sum int64
		for _, a := range got {
			sum += a
		}
		if sum != tc.total {
			t.Errorf("%d in %d adds up to %d", tc.total, tc.count, sum)
		}
	}
}

// TestInstallmentRetryDays: a declined installment is tried again 1, 3 and 7 days after its
// due date, when those days start in the client's zone, then goes to an operator; a run that
// is late does not spend the next retry at once.
func TestInstallmentRetryDays(t *testing.T) {
	t.Parallel()
	ist := mustLoad(t, "Europe/Istanbul")
	due := Day{2027, time.February, 28}
	cases := []struct {
		attempts int
		now      string
		want     string // "" for an operator
	}{
		{1, "2027-02-27T21:00:00Z", "2027-02-28T21:00:00Z"}, // due+1: Mar 1 starts in Istanbul
		{2, "2027-02-28T21:00:00Z", "2027-03-02T21:00:00Z"}, // due+3: Mar 3
		{3, "2027-03-02T21:00:00Z", "2027-03-06T21:00:00Z"}, // due+7: Mar 7
		{4, "2027-03-06T21:00:00Z", ""},
		{1, "2027-03-10T12:00:00Z", "2027-03-10T21:00:00Z"}, // late: the day after now, not at once
	}
	for _, tc := range cases {
		got, ok := nextInstallmentAttempt(due, tc.attempts, utc(tc.now), ist)
		switch {
		case tc.want == "" && ok:
			t.Errorf("after %d attempts: retry at %s, want an operator", tc.attempts, got)
		case tc.want != "" && (!ok || !got.Equal(utc(tc.want))):
			t.Errorf("after %d attempts at %s: retry at %s (%v), want %s", tc.attempts, tc.now, got.UTC(), ok, tc.want)
		}
	}
}

// installmentEnv is an actionEnv whose client lives in zone, with a customer's saved card.
type installmentEnv struct {
	*actionEnv
	sandbox *psp.Sandbox
	pm      psp.PaymentMethod
}

func newInstallmentEnv(t *testing.T, zone string, now time.Time) *installmentEnv {
	t.Helper()
	e := &installmentEnv{actionEnv: newActionEnv(t)}
	e.now = now
	if _, err := e.db.Exec(`UPDATE clients SET time_zone = $2 WHERE id = $1`, e.client.ID, zone); err != nil {
		t.Fatal(err)
	}
	e.sandbox = e.p.Provider.(*psp.Sandbox)
	var err error
	if e.pm, err = e.sandbox.SavePaymentMethod(context.Background(), ProviderCustomer(e.client.ID, "cus_1"), psp.TokenVisa); err != nil {
		t.Fatal(err)
	}
	return e
}

// plan orders amount in count installments on the saved card, under key; it returns the
// order's public id and internal id.
func (e *installmentEnv) plan(key string, amount int64, count int) (string, int64) {
	e.t.Helper()
	in := OrderInput{Currency: "TRY", Amount: amount, Installments: count,
		Payment: PaymentInput{Customer: "cus_1", PaymentMethod: e.pm.ID},
		Items:   []Item{{SKU: "SOFA", Name: "Sofa", Quantity: 1, UnitAmount: amount}}}
	if errs := in.Validate(); len(errs) > 0 {
		e.t.Fatalf("order %s: %v", key, errs)
	}
	body, _ := json.Marshal(in)
	res, err := e.s.CreateOrder(context.Background(), Request{Client: e.client, Key: key, Method: "POST", Path: "/v1/orders", Body: body}, Lookup{}, in)
	if err != nil || res.Status != http.StatusCreated {
		e.t.Fatalf("order %s: %d %s %v", key, res.Status, res.Body, err)
	}
	var v OrderView
	if err := json.Unmarshal(res.Body, &v); err != nil {
		e.t.Fatal(err)
	}
	if len(v.Installments) != count || v.Installments[0].Status != "paid" || v.Installments[1].Status != "scheduled" {
		e.t.Fatalf("order %s answered installments %+v", key, v.Installments)
	}
	return v.ID, e.count(`SELECT id FROM orders WHERE public_id = $1`, v.ID)
}

// run runs the job at the instant at and returns what it did.
func (e *installmentEnv) run(at string) InstallmentRunResult {
	e.t.Helper()
	res, err := e.s.chargeDueInstallments(context.Background(), utc(at))
	if err != nil {
		e.t.Fatalf("installments at %s: %v", at, err)
	}
	return res
}

// ledgerAgrees checks that tekrar and the provider hold the same charges of order id: one
// succeeded charge per paid installment, under the installment's key, for its amount, and
// the order's captured amount their sum.
func (e *installmentEnv) ledgerAgrees(id int64) {
	e.t.Helper()
	var rows []struct {
		N      int    `db:"n"`
		Amount int64  `db:"amount"`
		Key    string `db:"provider_key"`
		Charge string `db:"provider_charge_id"`
	}
	if err := e.db.Select(&rows, `SELECT n, amount, provider_key, provider_charge_id FROM installments
		 WHERE order_id = $1 AND status = 'paid' ORDER BY n`, id); err != nil {
		e.t.Fatal(err)
	}
	var captured int64
	for _, r := range rows {
		captured += r.Amount
		ch, err := e.sandbox.LookupCharge(context.Background(), r.Key)
		if err != nil || ch.ID != r.Charge || ch.Amount != r.Amount || ch.Status != psp.StatusSucceeded {
			e.t.Errorf("order %d installment %d: tekrar has %s for %d; the provider %+v %v", id, r.N, r.Charge, r.Amount, ch, err)
		}
	}
	if n := e.count(`SELECT count(*) FROM psp_charges WHERE (description = $1 OR description LIKE $2) AND status = 'succeeded'`,
		chargeDescription(id), chargeDescription(id)+" installment %"); n != int64(len(rows)) {
		e.t.Errorf("order %d: the provider holds %d succeeded charges, tekrar %d paid installments", id, n, len(rows))
	}
	if got := e.count(`SELECT captured_amount FROM orders WHERE id = $1`, id); got != captured {
		e.t.Errorf("order %d captured %d, its paid installments add up to %d", id, got, captured)
	}
}

// TestInstallmentsChargedOnTheirDueDay: a client in Istanbul (UTC+3) whose order of Jan 31
// late evening is paid in 3: the first with the order, the second as Feb 28 starts there
// (21:00 UTC on Feb 27, not a second before), the third on Mar 31. A rerun charges nothing.
func TestInstallmentsChargedOnTheirDueDay(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "Europe/Istanbul", utc("2027-01-31T20:30:00Z")) // 23:30 in Istanbul
	_, id := e.plan("k-sofa", 1000, 3)
	if got := e.count(`SELECT amount FROM payments WHERE order_id = $1`, id); got != 334 {
		t.Errorf("the order's charge took %d, want the first installment's 334", got)
	}
	steps := []struct {
		at      string
		charged int
	}{
		{"2027-02-27T20:59:59Z", 0}, // Feb 27, 23:59:59 in Istanbul
		{"2027-02-27T21:00:00Z", 1}, // Feb 28 starts
		{"2027-02-27T21:00:00Z", 0}, // a rerun
		{"2027-03-30T20:59:59Z", 0},
		{"2027-03-30T21:00:00Z", 1}, // Mar 31
		{"2027-06-01T00:00:00Z", 0},
	}
	for _, s := range steps {
		if res := e.run(s.at); res.Charged != s.charged {
			t.Errorf("run at %s: %+v, want %d charged", s.at, res, s.charged)
		}
	}
	e.ledgerAgrees(id)
	if got := e.str(`SELECT string_agg(n || ' ' || status || ' ' || due_on, ', ' ORDER BY n) FROM installments WHERE order_id = $1`, id); got != "1 paid 2027-01-31, 2 paid 2027-02-28, 3 paid 2027-03-31" {
		t.Errorf("installments: %s", got)
	}
	if got := e.count(`SELECT captured_amount FROM orders WHERE id = $1`, id); got != 1000 {
		t.Errorf("captured %d, want the whole 1000", got)
	}
}

// TestInstallmentJobOnManyReplicasAtOnce: four services (as four processes would) run the
// job at the same instant over 30 due installments: each is charged once at the provider and
// recorded once, and the provider's ledger and tekrar's agree.
func TestInstallmentJobOnManyReplicasAtOnce(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "Europe/Berlin", utc("2027-03-10T09:00:00Z"))
	const orders = 15
	ids := make([]int64, orders)
	for i := range ids {
		_, ids[i] = e.plan(fmt.Sprintf("k-%d", i), int64(900+i), 3)
	}
	replicas := make([]*Service, 4)
	for i := range replicas {
		replicas[i] = NewService(e.db, e.p, Config{Routes: testRoutes, Now: e.s.cfg.Now}, slog.New(slog.DiscardHandler))
		t.Cleanup(replicas[i].Close)
	}
	var wg sync.WaitGroup
	results := make([]InstallmentRunResult, len(replicas))
	for i, s := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], err = s.chargeDueInstallments(context.Background(), utc("2027-05-10T00:00:00Z"))
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, r := range results {
		total += r.Charged
	}
	if total != 2*orders {
		t.Errorf("the replicas charged %d installments (%+v), want %d", total, results, 2*orders)
	}
	for _, id := range ids {
		e.ledgerAgrees(id)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges`); n != 3*orders {
		t.Errorf("the provider holds %d charges, want %d", n, 3*orders)
	}
}

// TestFrozenInstallmentRunWritesNothing: a run takes an installment and freezes before it
// calls the provider; its lease lapses, another run takes the installment over and records
// its charge. The frozen run wakes and charges: the provider answers with the same charge
// (the same derived key), and its record matches no row (the lease token moved on).
func TestFrozenInstallmentRunWritesNothing(t *testing.T) {
	t.Parallel()
	e := newInstallmentEnv(t, "UTC", utc("2027-01-15T09:00:00Z"))
	_, id := e.plan("k-frozen", 600, 2)
	at := utc("2027-02-15T00:00:00Z")
	frozen, err := e.s.claimInstallment(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	e.advance(e.s.cfg.Lease + time.Second)
	// The other run takes it over: the attempt was in flight, so it looks it up first.
	taker, err := e.s.claimInstallment(context.Background(), at)
	if err != nil {
		t.Fatalf("take over after the lease: %v", err)
	}
	if !taker.Resumed || taker.Key != frozen.Key || taker.LeaseToken == frozen.LeaseToken {
		t.Errorf("takeover %+v of %+v: want the same attempt and key under a new token", taker, frozen)
	}
	var res InstallmentRunResult
	if err := e.s.chargeInstallment(context.Background(), frozen, at, &res); err != nil {
		t.Fatal(err)
	}
	if res.Fenced != 1 || res.Charged != 0 {
		t.Errorf("the woken run recorded %+v, want only fenced", res)
	}
	if got := e.str(`SELECT status FROM installments WHERE order_id = $1 AND n = 2`, id); got != "scheduled" {
		t.Errorf("the woken run's charge was recorded: installment is %s", got)
	}
	res = InstallmentRunResult{}
	if err := e.s.chargeInstallment(context.Background(), taker, at, &res); err != nil {
		t.Fatal(err)
	}
	if res.Charged != 1 {
		t.Errorf("the taker recorded %+v, want charged", res)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges WHERE description = $1`, installmentDescription(id, 2)); n != 1 {
		t.Errorf("the provider made %d charges of installment 2, want 1", n)
	}
	e.ledgerAgrees(id)
}

// TestDeclinedInstallmentRetriesThenOperator: the saved card declines from the second
// installment on: it is tried on its due day and 1, 3 and 7 days later (each under a new
// key), then waits for an operator. A second order's card is replaced after one decline and
// its retry pays.
func TestDeclinedInstallmentRetriesThenOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInstallmentEnv(t, "America/New_York", utc("2027-10-07T15:00:00Z"))
	_, id := e.plan("k-declines", 2000, 2)
	if err := e.sandbox.ReplacePaymentMethodCard(ctx, e.pm.ID, psp.TokenDeclined); err != nil {
		t.Fatal(err)
	}
	// Due Nov 7, the day New York leaves summer time: it starts at 04:00 UTC.
	steps := []struct {
		at              string
		retry, operator int
		status          string
	}{
		{"2027-11-07T03:59:59Z", 0, 0, "scheduled"},
		{"2027-11-07T04:00:00Z", 1, 0, "scheduled"},
		{"2027-11-08T04:59:59Z", 0, 0, "scheduled"}, // Nov 8 starts at 05:00 UTC (EST)
		{"2027-11-08T05:00:00Z", 1, 0, "scheduled"},
		{"2027-11-10T05:00:00Z", 1, 0, "scheduled"},
		{"2027-11-14T05:00:00Z", 0, 1, "attention"},
		{"2027-12-31T05:00:00Z", 0, 0, "attention"},
	}
	for _, s := range steps {
		res := e.run(s.at)
		if res.Retry != s.retry || res.Attention != s.operator {
			t.Errorf("run at %s: %+v, want %d retried, %d to an operator", s.at, res, s.retry, s.operator)
		}
		if got := e.str(`SELECT status FROM installments WHERE order_id = $1 AND n = 2`, id); got != s.status {
			t.Errorf("after %s: installment is %s, want %s", s.at, got, s.status)
		}
	}
	if n := e.count(`SELECT count(DISTINCT key) FROM psp_charges WHERE description = $1 AND status = 'declined'`, installmentDescription(id, 2)); n != 4 {
		t.Errorf("%d declined attempts at the provider, want 4 under 4 keys", n)
	}
	e.ledgerAgrees(id)

	// A new card after the first decline: the retry pays.
	if err := e.sandbox.ReplacePaymentMethodCard(ctx, e.pm.ID, psp.TokenVisa); err != nil {
		t.Fatal(err)
	}
	e.now = utc("2028-01-05T15:00:00Z")
	_, id2 := e.plan("k-new-card", 2000, 2)
	if err := e.sandbox.ReplacePaymentMethodCard(ctx, e.pm.ID, psp.TokenDeclined); err != nil {
		t.Fatal(err)
	}
	e.run("2028-02-05T05:00:00Z")
	if err := e.sandbox.ReplacePaymentMethodCard(ctx, e.pm.ID, psp.TokenMastercard); err != nil {
		t.Fatal(err)
	}
	if res := e.run("2028-02-06T05:00:00Z"); res.Charged != 1 {
		t.Errorf("retry on the new card: %+v", res)
	}
	if got := e.count(`SELECT attempts FROM installments WHERE order_id = $1 AND n = 2 AND status = 'paid'`, id2); got != 2 {
		t.Errorf("paid on attempt %d, want 2", got)
	}
	e.ledgerAgrees(id2)
}

// TestRefundCancelsUnpaidInstallments: a refund cancels the unpaid installments in its own
// transaction, so no later run charges them; while an installment's charge is in flight the
// refund is refused (409 installment_in_flight) and nothing is stored.
func TestRefundCancelsUnpaidInstallments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInstallmentEnv(t, "UTC", utc("2027-01-15T09:00:00Z"))
	pub, id := e.plan("k-refund", 1200, 4)
	e.run("2027-02-15T00:00:00Z")

	// Installment 3 in flight: a run took it and has not recorded its outcome.
	c, err := e.s.claimInstallment(ctx, utc("2027-03-15T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	if status := e.refund("r-early", pub, 100); status != http.StatusConflict {
		t.Errorf("refund while an installment is charged: %d, want 409", status)
	}
	if n := e.count(`SELECT count(*) FROM refunds WHERE order_id = $1`, id); n != 0 {
		t.Errorf("the refused refund stored %d refunds", n)
	}
	var res InstallmentRunResult
	if err := e.s.chargeInstallment(ctx, c, utc("2027-03-15T00:00:00Z"), &res); err != nil || res.Charged != 1 {
		t.Fatalf("charge installment 3: %+v %v", res, err)
	}

	if status := e.refund("r-1", pub, 100); status != http.StatusCreated {
		t.Fatalf("refund: %d", status)
	}
	if got := e.str(`SELECT string_agg(n || ' ' || status, ', ' ORDER BY n) FROM installments WHERE order_id = $1`, id); got != "1 paid, 2 paid, 3 paid, 4 canceled" {
		t.Errorf("after the refund: %s", got)
	}
	if res := e.run("2027-12-31T00:00:00Z"); res.Charged != 0 {
		t.Errorf("a run after the refund charged %+v", res)
	}
	e.ledgerAgrees(id)
	// The refund is made from the first installment's charge: no more than it.
	if status := e.refund("r-2", pub, 300); status != http.StatusConflict {
		t.Errorf("refund beyond the first installment: %d, want 409", status)
	}
}

// TestReconcileKnowsInstallmentCharges: reconciliation meets the charges of installments —
// paid, and one made at the provider whose run died before recording it — and finds no
// orphan and no mismatch, so refunds nothing; the rerun then records the charge.
func TestReconcileKnowsInstallmentCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInstallmentEnv(t, "UTC", time.Now().UTC().Truncate(time.Microsecond).AddDate(0, 0, -2))
	_, id := e.plan("k-reco", 1000, 3)
	e.run(e.now.AddDate(0, 1, 1).Format(time.RFC3339))
	// Installment 3: charged at the provider, the run dead before it recorded it.
	at := e.now.AddDate(0, 2, 1)
	c, err := e.s.claimInstallment(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Charge(ctx, psp.ChargeRequest{Key: c.Key, Amount: c.Amount, Currency: c.Currency,
		Customer: c.ProviderCustomer.String, PaymentMethod: c.PaymentMethod.String, Description: installmentDescription(id, 3)}); err != nil {
		t.Fatal(err)
	}
	res := e.reconcile()
	if res.Orphans != 0 || res.Mismatches != 0 || res.RefundsMade != 0 || res.ChargesSeen != 3 {
		t.Errorf("reconcile: %+v, want 3 charges seen and nothing wrong", res)
	}
	e.advance(e.s.cfg.Lease + time.Second)
	if r := e.run(at.Format(time.RFC3339)); r.Charged != 1 {
		t.Errorf("the rerun: %+v, want the charge recorded", r)
	}
	if n := e.count(`SELECT count(*) FROM psp_charges`); n != 3 {
		t.Errorf("the provider holds %d charges, want 3", n)
	}
	e.ledgerAgrees(id)
}

// TestInstallmentInputs: what POST /v1/orders refuses about installments.
func TestInstallmentInputs(t *testing.T) {
	t.Parallel()
	saved := PaymentInput{Customer: "cus_1", PaymentMethod: "pm_1"}
	cases := []struct {
		name  string
		in    OrderInput
		field string // "" when valid
	}{
		{"valid", OrderInput{Installments: 3, Amount: 300, Payment: saved}, ""},
		{"one is no plan", OrderInput{Installments: 1, Amount: 300, Payment: PaymentInput{CardToken: "tok_visa"}}, ""},
		{"thirteen", OrderInput{Installments: 13, Amount: 300, Payment: saved}, "installments"},
		{"negative", OrderInput{Installments: -2, Amount: 300, Payment: saved}, "installments"},
		{"on a token", OrderInput{Installments: 3, Amount: 300, Payment: PaymentInput{CardToken: "tok_visa"}}, "installments"},
		{"less than a unit each", OrderInput{Installments: 3, Amount: 2, Payment: saved}, "installments"},
		{"method without customer", OrderInput{Installments: 3, Amount: 300, Payment: PaymentInput{PaymentMethod: "pm_1"}}, "payment.customer"},
		{"token and method", OrderInput{Amount: 300, Payment: PaymentInput{CardToken: "tok_visa", Customer: "c", PaymentMethod: "pm_1"}}, "payment.card_token"},
		// The provider customer holds the client id too (ProviderCustomer): 255 in all.
		{"longest customer", OrderInput{Installments: 3, Amount: 300, Payment: PaymentInput{Customer: strings.Repeat("c", MaxCustomer), PaymentMethod: "pm_1"}}, ""},
		{"customer too long", OrderInput{Installments: 3, Amount: 300, Payment: PaymentInput{Customer: strings.Repeat("c", MaxCustomer+1), PaymentMethod: "pm_1"}}, "payment.customer"},
	}
	for _, tc := range cases {
		tc.in.Currency = "TRY"
		tc.in.Items = []Item{{SKU: "S", Name: "S", Quantity: 1, UnitAmount: tc.in.Amount}}
		errs := tc.in.Validate()
		switch {
		case tc.field == "" && len(errs) > 0:
			t.Errorf("%s: refused %v", tc.name, errs)
		case tc.field != "" && (len(errs) != 1 || errs[0].Field != tc.field):
			t.Errorf("%s: %v, want one error on %s", tc.name, errs, tc.field)
		}
	}
	var p *problem.Problem
	if !errors.As(errInstallmentInFlight(), &p) || p.Status != http.StatusConflict {
		t.Errorf("installment_in_flight is %+v", p)
	}
}

// TestEndedOrdersCancelTheirPlans: every way an order in installments ends without its plan
// being paid cancels the installments left, so that the job never charges them: an order
// whose first charge never happened (an operator's release finds no charge), and a refund
// made at the provider's dashboard (its webhook), as a refund through tekrar does.
func TestEndedOrdersCancelTheirPlans(t *testing.T) {
	plan := func(e *installmentEnv, id int64) string {
		e.t.Helper()
		return e.str(`SELECT string_agg(n || ' ' || status, ', ' ORDER BY n) FROM installments WHERE order_id = $1`, id)
	}
	t.Run("abandoned before its first charge", func(t *testing.T) {
		t.Parallel()
		e := newInstallmentEnv(t, "UTC", utc("2027-01-10T09:00:00Z"))
		e.p.set("down")
		in := OrderInput{Currency: "TRY", Amount: 900, Installments: 3,
			Payment: PaymentInput{Customer: "cus_1", PaymentMethod: e.pm.ID},
			Items:   []Item{{SKU: "SOFA", Name: "Sofa", Quantity: 1, UnitAmount: 900}}}
		body, _ := json.Marshal(in)
		res, err := e.s.CreateOrder(context.Background(), Request{Client: e.client, Key: "k-plan", Method: "POST", Path: "/v1/orders", Body: body}, Lookup{}, in)
		if err == nil || res.Status == http.StatusCreated {
			t.Fatalf("order with the provider down: %d %s %v; want payment_pending", res.Status, res.Body, err)
		}
		e.p.set("")
		e.needsAttention("k-plan")
		r, err := e.s.ReleaseKey(context.Background(), e.client.ID, "k-plan", e.record(false))
		if err != nil || r.Outcome != OutcomeCanceled {
			t.Fatalf("release: %+v %v", r, err)
		}
		id := e.count(`SELECT id FROM orders`)
		if got := plan(e, id); got != "1 canceled, 2 canceled, 3 canceled" {
			t.Fatalf("plan of the canceled order: %s", got)
		}
		if res := e.run("2027-04-01T00:00:00Z"); res.Charged != 0 || e.count(`SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`) != 0 {
			t.Fatalf("the job charged a canceled plan: %+v", res)
		}
	})
	t.Run("refunded at the provider", func(t *testing.T) {
		t.Parallel()
		e := newInstallmentEnv(t, "UTC", utc("2027-01-10T09:00:00Z"))
		_, id := e.plan("k-plan", 900, 3)
		var ch struct {
			ID  string `db:"provider_charge_id"`
			Key string `db:"provider_key"`
		}
		if err := e.db.Get(&ch, `SELECT provider_charge_id, provider_key FROM payments WHERE order_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		// Installment 2 is being charged when the refund arrives: its holder's record must
		// then match nothing (its charge, if made, is an orphan for reconciliation).
		if _, err := e.db.Exec(`UPDATE installments SET in_flight = true, attempts = 1, lease_token = 7,
			    lease_expires_at = '2027-01-11T10:00:00Z' WHERE order_id = $1 AND n = 2`, id); err != nil {
			t.Fatal(err)
		}
		pe := psp.Event{ID: "evt_dashboard", Type: psp.EventRefundSucceeded, Created: utc("2027-01-11T09:00:00Z"),
			Data: psp.EventData{ChargeID: ch.ID, ChargeKey: ch.Key, Sequence: 2, Amount: 300, Currency: "TRY", Description: chargeDescription(id),
				Status: psp.StatusSucceeded, RefundedAmount: 100}}
		body, _ := json.Marshal(pe)
		if out, err := e.receiveProviderEvent(body, pe); err != nil || out != "applied" {
			t.Fatalf("the dashboard's refund: %s %v", out, err)
		}
		if got := plan(e, id); got != "1 paid, 2 canceled, 3 canceled" {
			t.Fatalf("plan after a refund at the provider: %s", got)
		}
		var recorded int64
		if err := e.db.Get(&recorded, installmentPaidSQL, id, 2, 7, "ch_late", utc("2027-01-11T09:30:00Z")); !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("the in-flight installment's holder recorded its charge after the refund canceled it: %v", err)
		}
		if res := e.run("2027-04-01T00:00:00Z"); res.Charged != 0 {
			t.Fatalf("the job charged a refunded order's plan: %+v", res)
		}
	})
}
