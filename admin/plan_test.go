package admin_test

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/apptest"
)

// planRow is an installment as the database holds it, with the charges the provider's
// ledger holds under its keys.
type planRow struct {
	N        int        `db:"n"`
	DueOn    string     `db:"due_on"`
	Status   string     `db:"status"`
	Attempts int        `db:"attempts"`
	ChargeID *string    `db:"provider_charge_id"`
	PaidAt   *time.Time `db:"paid_at"`
}

func planRows(t *testing.T, e *apptest.Env, id string) []planRow {
	t.Helper()
	var rows []planRow
	if err := e.DB.Select(&rows, `
		SELECT i.n, to_char(i.due_on, 'YYYY-MM-DD') AS due_on, i.status, i.attempts, i.provider_charge_id, i.paid_at
		  FROM installments i JOIN orders o ON o.id = i.order_id WHERE o.public_id = $1 ORDER BY i.n`, id); err != nil {
		t.Fatal(err)
	}
	return rows
}

// ledgerCharges counts the succeeded charges the provider's ledger (its events' table and
// the sandbox's own) holds under each installment's keys, by installment.
func ledgerCharges(t *testing.T, e *apptest.Env, id string) map[int]int {
	t.Helper()
	var o struct {
		ID        int64     `db:"id"`
		CreatedAt time.Time `db:"created_at"`
		Intent    []byte    `db:"intent"`
		Key       string    `db:"provider_key"`
	}
	if err := e.DB.Get(&o, `SELECT o.id, o.created_at, o.intent, p.provider_key FROM orders o JOIN payments p ON p.order_id = o.id
		 WHERE o.public_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, r := range planRows(t, e, id) {
		keys := []string{o.Key}
		if r.N > 1 {
			keys = nil
			for a := 1; a <= r.Attempts; a++ {
				keys = append(keys, checkout.InstallmentKey(o.ID, o.CreatedAt, o.Intent, r.N, a))
			}
		}
		var n int
		if err := e.DB.Get(&n, `SELECT count(DISTINCT id) FROM (
			SELECT charge_id AS id FROM provider_charges WHERE charge_key = ANY ($1) AND status = 'succeeded'
			UNION SELECT id FROM psp_charges WHERE key = ANY ($1) AND status = 'succeeded') c`, keys); err != nil {
			t.Fatal(err)
		}
		out[r.N] = n
	}
	return out
}

// The order page lists an order's plan as the database holds it (each installment's due
// and paid dates in the client's zone, attempts, state and charges) and answers "was my
// installment charged twice?" from the charges the provider's ledger holds per installment:
// charged once, not charged yet, and charged twice (an attempt's answer was lost and the
// next attempt charged again), then refunded.
func TestInstallmentChargedTwiceVerdict(t *testing.T) {
	e := apptest.New(t)
	if _, err := e.DB.Exec(`UPDATE clients SET time_zone = 'Europe/Istanbul' WHERE id = $1`, e.ClientID); err != nil {
		t.Fatal(err)
	}
	b := actSignIn(t, e, "viewer@example.com", admin.RoleViewer)
	once := planOrder(t, e, "k-once", "cus_once", 300000, 3)
	twice := planOrder(t, e, "k-twice", "cus_twice", 300000, 3)
	if _, err := e.App.Installments.Run(context.Background(), e.Clock.Now().AddDate(0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	chargeInstallmentAgain(t, e, twice, 2)

	for _, c := range []struct {
		order    string
		kind     string
		headline string
		charges  map[int]int
	}{
		{once, "once", "No installment was charged twice: 2 of 3 installments charged once each, 1 not charged yet.", map[int]int{1: 1, 2: 1, 3: 0}},
		{twice, "twice", "Installment 2 was charged twice: 2 charges for installment 2, a refund is owed.", map[int]int{1: 1, 2: 2, 3: 0}},
	} {
		if got := ledgerCharges(t, e, c.order); !maps.Equal(got, c.charges) {
			t.Fatalf("order %s: the ledger holds %v charges per installment, want %v", c.order, got, c.charges)
		}
		p := b.do("GET", "/admin/orders/"+c.order, nil)
		answer := p.doc.Find("#plan-verdict")
		if !answer.HasClass(c.kind) || strings.TrimSpace(answer.Find(".headline").Text()) != c.headline {
			t.Errorf("order %s: the plan's answer is %q (%s), want %q (%s)", c.order, answer.Find(".headline").Text(),
				answer.AttrOr("class", ""), c.headline, c.kind)
		}
		rows := planRows(t, e, c.order)
		trs := p.doc.Find("table.installments tbody tr")
		if trs.Length() != len(rows) {
			t.Fatalf("order %s: %d rows shown, %d in the database", c.order, trs.Length(), len(rows))
		}
		istanbul, _ := time.LoadLocation("Europe/Istanbul")
		trs.Each(func(i int, tr *goquery.Selection) {
			r := rows[i]
			cell := func(n int) string { return strings.TrimSpace(tr.Find("td").Eq(n).Text()) }
			paid := ""
			if r.PaidAt != nil {
				paid = r.PaidAt.In(istanbul).Format(time.DateOnly)
			}
			if cell(2) != r.DueOn || cell(3) != paid || cell(4) != r.Status || cell(5) != strconv.Itoa(r.Attempts) {
				t.Errorf("order %s installment %d shows due %q paid %q %q attempts %q, the database %+v (paid %q)",
					c.order, r.N, cell(2), cell(3), cell(4), cell(5), r, paid)
			}
			if n := tr.Find("td.charges code").Length(); n != c.charges[r.N] {
				t.Errorf("order %s installment %d shows %d charges, the ledger holds %d", c.order, r.N, n, c.charges[r.N])
			}
			if r.ChargeID != nil && !strings.Contains(cell(8), *r.ChargeID) {
				t.Errorf("order %s installment %d lacks its charge %s: %q", c.order, r.N, *r.ChargeID, cell(8))
			}
		})
		facts := answer.Find("li").Text()
		for n, count := range c.charges {
			want := map[int]string{0: "not charged yet", 1: "charged once", 2: "charged twice: 2 charges for installment"}[count]
			if !strings.Contains(facts, "Installment "+strconv.Itoa(n)+" (") || !strings.Contains(facts, want) {
				t.Errorf("order %s: the facts lack installment %d %q: %s", c.order, n, want, facts)
			}
		}
	}
	// The extra charge refunded at the provider: the answer says the refund was made.
	if _, err := e.DB.Exec(`UPDATE provider_charges SET refunded = amount WHERE charge_id = 'ch_again'`); err != nil {
		t.Fatal(err)
	}
	p := b.do("GET", "/admin/orders/"+twice, nil)
	if got := strings.TrimSpace(p.doc.Find("#plan-verdict .headline").Text()); got != "Installment 2 was charged twice: 2 charges for installment 2, a refund was made." {
		t.Errorf("after the refund the answer is %q", got)
	}
}

// chargeInstallmentAgain makes installment n of order charged twice, as the provider's
// ledger would hold it: its first attempt's charge went through, its answer was lost, and
// the next attempt charged again under its own key (ch_again, in provider_charges).
func chargeInstallmentAgain(t *testing.T, e *apptest.Env, order string, n int) {
	t.Helper()
	var o struct {
		ID        int64     `db:"id"`
		CreatedAt time.Time `db:"created_at"`
		Intent    []byte    `db:"intent"`
		Amount    int64     `db:"amount"`
	}
	if err := e.DB.Get(&o, `SELECT o.id, o.created_at, o.intent, i.amount FROM orders o JOIN installments i ON i.order_id = o.id
		 WHERE o.public_id = $1 AND i.n = $2`, order, n); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(`UPDATE installments SET attempts = 2 WHERE order_id = $1 AND n = $2`, o.ID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(`
		INSERT INTO provider_charges (provider, charge_id, charge_key, last_sequence, status, amount, currency, refunded, updated_at)
		VALUES ('sandbox', 'ch_again', $1, 1, 'succeeded', $2, 'TRY', 0, now())`,
		checkout.InstallmentKey(o.ID, o.CreatedAt, o.Intent, n, 2), o.Amount); err != nil {
		t.Fatal(err)
	}
}
