package receipts

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// installmentOrder inserts an order of one sofa (900.00 TRY) paid in 3 installments of
// 300.00 TRY on a saved card, the first (the order's payment) and the second paid, the
// third scheduled; it returns the order's public id.
func (f *fixture) installmentOrder(clientID int64, email string) string {
	f.t.Helper()
	var pub string
	var id int64
	err := f.db.QueryRowx(`
		INSERT INTO orders (client_id, status, amount, currency, items, customer_email, captured_amount, installments,
		                    payment_customer, provider_customer, payment_method, created_at, updated_at)
		VALUES ($1, 'paid', 90000, 'TRY', '[{"sku":"SOFA","name":"Sofa","quantity":1,"unit_amount":90000}]', $2, 60000, 3,
		        'cus_1', 'cl_' || $1::bigint || '_cus_1', 'pm_1', $3, $3)
		RETURNING public_id, id`, clientID, email, testNow).Scan(&pub, &id)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Exec(`
		INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status, card_brand, card_last4, created_at)
		VALUES ($1, 'ch_' || $3, 'pk_' || $3, 30000, 'TRY', 'succeeded', 'visa', '4242', $2);
		`, id, testNow, pub); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Exec(`
		INSERT INTO installments (order_id, n, amount, due_on, due_at, status, attempts, provider_charge_id, paid_at,
		                          next_attempt_at, updated_at)
		VALUES ($1, 1, 30000, '2026-12-03', $2, 'paid', 1, 'ch_i1_' || CAST($1 AS bigint), $2, NULL, $2),
		       ($1, 2, 30000, '2027-01-03', $3, 'paid', 2, 'ch_i2_' || CAST($1 AS bigint), $4, NULL, $4),
		       ($1, 3, 30000, '2027-02-03', $5, 'scheduled', 0, NULL, NULL, $5, $2)`,
		id, testNow, testNow.AddDate(0, 1, 0), time.Date(2027, 1, 4, 9, 30, 0, 0, time.UTC), testNow.AddDate(0, 2, 0)); err != nil {
		f.t.Fatal(err)
	}
	return pub
}

// TestAPaidInstallmentHasItsReceipt: installment.paid makes one receipt per installment,
// saying which installment of how many, its amount and when it was charged, and naming no
// card (the saved card may have changed since the order's charge); handling the event again
// makes no second one. Other installment events, and an installment not paid, make none.
func TestAPaidInstallmentHasItsReceipt(t *testing.T) {
	f := newFixture(t)
	order := f.installmentOrder(f.client("Shop"), "ayse@example.com")
	keeping := &Recorder{From: testFrom, Now: func() time.Time { return testNow }}
	h := &Handler{Recorder: keeping}
	handle := func(ev outbox.Event) {
		t.Helper()
		tx, err := f.db.DB.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := h.HandleEvent(context.Background(), tx, ev); err != nil {
			t.Fatalf("%s %s: %v", ev.Type, ev.Payload, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	paid := outbox.Event{ID: eventID(), Type: outbox.InstallmentPaid,
		Payload: []byte(`{"order":"` + order + `","status":"paid","amount":90000,"currency":"TRY","installment":{"n":2,"count":3,"amount":30000}}`)}
	handle(paid)
	handle(paid) // a dispatch run again
	for _, ev := range []outbox.Event{
		{ID: eventID(), Type: outbox.InstallmentDeclined, Payload: []byte(`{"order":"` + order + `","installment":{"n":3}}`)},
		{ID: eventID(), Type: outbox.InstallmentNeedsAttention, Payload: []byte(`{"order":"` + order + `","installment":{"n":3}}`)},
		{ID: eventID(), Type: outbox.InstallmentPaid, Payload: []byte(`{"order":"` + order + `","installment":{"n":3}}`)}, // not paid
		{ID: eventID(), Type: outbox.InstallmentPaid, Payload: []byte(`{"order":"` + order + `","installment":{"n":1}}`)}, // the order's own
	} {
		handle(ev)
	}
	if n := f.count(`true`); n != 1 {
		t.Fatalf("%d receipts, want the paid installment's one", n)
	}
	var kind, subject, text, html string
	if err := f.db.QueryRow(`SELECT kind, subject, body_text, body_html FROM receipts WHERE event_id = $1`, paid.ID).
		Scan(&kind, &subject, &text, &html); err != nil {
		t.Fatal(err)
	}
	if kind != KindInstallment || subject != "Receipt from Shop" {
		t.Errorf("kind %q subject %q", kind, subject)
	}
	for _, want := range []string{
		"Shop received your payment of 300.00 TRY, installment 2 of 3 of your order, on 4 January 2027 09:30 UTC.",
		"Installment 2 of 3: 300.00 TRY", "Total: 900.00 TRY", "Order " + order,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text does not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Card:") || strings.Contains(html, "4242") {
		t.Errorf("an installment's receipt names the order's first card:\n%s", text)
	}
	if !strings.Contains(html, "<strong>300.00 TRY</strong>, installment 2 of 3 of your order") {
		t.Errorf("the HTML does not say the installment:\n%s", html)
	}
}

// TestReceiptTimesInTheClientsZone: a client in Istanbul (UTC+3) has its receipts write
// their times on its own clocks, with the zone named, in the text and the HTML: an
// installment paid at 09:30 UTC was paid at 12:30 in Istanbul. Before, the receipt said
// "09:30 UTC", which the shop's customers read as the wrong time.
func TestReceiptTimesInTheClientsZone(t *testing.T) {
	f := newFixture(t)
	client := f.client("Istanbul Shop")
	if _, err := f.db.Exec(`UPDATE clients SET time_zone = 'Europe/Istanbul' WHERE id = $1`, client); err != nil {
		t.Fatal(err)
	}
	order := f.installmentOrder(client, "ayse@example.com")
	h := &Handler{Recorder: &Recorder{From: testFrom, Now: func() time.Time { return testNow }}}
	paid := outbox.Event{ID: eventID(), Type: outbox.InstallmentPaid,
		Payload: []byte(`{"order":"` + order + `","status":"paid","installment":{"n":2,"count":3,"amount":30000}}`)}
	tx, err := f.db.DB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := h.HandleEvent(context.Background(), tx, paid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var text, html string
	if err := f.db.QueryRow(`SELECT body_text, body_html FROM receipts WHERE event_id = $1`, paid.ID).Scan(&text, &html); err != nil {
		t.Fatal(err)
	}
	const want = "on 4 January 2027 12:30 Europe/Istanbul"
	if !strings.Contains(text, want) || !strings.Contains(html, want) {
		t.Errorf("the receipt does not say %q:\n%s\n%s", want, text, html)
	}
	if strings.Contains(text, "UTC") || strings.Contains(text, "09:30") {
		t.Errorf("the receipt still writes UTC:\n%s", text)
	}
	r, err := Get(context.Background(), f.db, paid.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ClientTimeZone != "Europe/Istanbul" || ClientZone(r.ClientTimeZone).String() != "Europe/Istanbul" {
		t.Errorf("the receipt's client zone is %q", r.ClientTimeZone)
	}
}
