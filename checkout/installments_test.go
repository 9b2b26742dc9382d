package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

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
	if e.pm, err = e.sandbox.SavePaymentMethod(context.Background(), e.client.ProviderCustomer("cus_1"), psp.TokenVisa); err != nil {
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

// InstallmentRunForTest runs the installment job (package installments) over db and p on
// the clock now, charging what is due at at, and returns how many installments it charged.
// The package's tests may not import checkout/installments, which imports checkout:
// installments_hook_test.go, of the external test package, sets it.
var InstallmentRunForTest func(db *sqlx.DB, p psp.Provider, now func() time.Time, at time.Time) (charged int, err error)

// run runs the job at the instant at and returns how many installments it charged.
func (e *installmentEnv) run(at string) int {
	e.t.Helper()
	charged, err := InstallmentRunForTest(e.db, e.p, e.s.cfg.Now, utc(at))
	if err != nil {
		e.t.Fatalf("installments at %s: %v", at, err)
	}
	return charged
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
		// The provider customer holds the client's prefix too (at most 28): 255 in all.
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
		r, err := operatorOf(e.s).ReleaseKey(context.Background(), e.client.ID, "k-plan", e.record(false))
		if err != nil || r.Outcome != OutcomeCanceled {
			t.Fatalf("release: %+v %v", r, err)
		}
		id := e.count(`SELECT id FROM orders`)
		if got := plan(e, id); got != "1 canceled, 2 canceled, 3 canceled" {
			t.Fatalf("plan of the canceled order: %s", got)
		}
		if charged := e.run("2027-04-01T00:00:00Z"); charged != 0 || e.count(`SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`) != 0 {
			t.Fatalf("the job charged a canceled plan: %d charged", charged)
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
			Data: psp.EventData{ChargeID: ch.ID, ChargeKey: ch.Key, Sequence: 2, Amount: 300, Currency: "TRY", Description: fmt.Sprintf("order %d", id),
				Status: psp.StatusSucceeded, RefundedAmount: 100}}
		body, _ := json.Marshal(pe)
		if out, err := e.receiveProviderEvent(body, pe); err != nil || out != "applied" {
			t.Fatalf("the dashboard's refund: %s %v", out, err)
		}
		if got := plan(e, id); got != "1 paid, 2 canceled, 3 canceled" {
			t.Fatalf("plan after a refund at the provider: %s", got)
		}
		// That its holder's record then matches nothing is package installments' test
		// (TestACanceledInstallmentRecordsNothing).
		if charged := e.run("2027-04-01T00:00:00Z"); charged != 0 {
			t.Fatalf("the job charged a refunded order's plan: %d charged", charged)
		}
	})
}
