package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/receipts/receiptstest"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// TestPaymentAndRefundEmailReceipts: a payment through the API, with the app's background
// work running (River), makes an order.paid event, its dispatch a receipt and the receipt's
// job one e-mail to the customer, with the event's Message-ID; a refund does the same with
// order.refunded. The payment replayed makes no second receipt.
func TestPaymentAndRefundEmailReceipts(t *testing.T) {
	mb := receiptstest.New(t, "", "")
	e := apptest.New(t, func(c *config.Server) {
		c.SMTP, c.SMTPFrom, c.OutboxPoll = mb.Server, "Kahve <receipts@kahve.example>", 50*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	done := make(chan struct{})
	go func() { e.App.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	body := []byte(`{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":2,"unit_amount":4500}],
		"amount":9000,"payment":{"card_token":"tok_visa"},"customer":{"id":"cus_42","email":"ayse@example.com"}}`)
	var order struct{ ID string }
	for range 2 { // the second is a replay: no new event
		r := e.Do(t, "POST", "/v1/orders", e.Secret, body, "Idempotency-Key", "receipt-e2e")
		if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &order) != nil {
			t.Fatalf("pay: %d %s", r.Status, r.Body)
		}
	}
	paid := mb.Wait(ctx, 1)[0]
	checkReceipt(t, e, paid, "order.paid", "ayse@example.com", "90.00 TRY")

	r := e.Do(t, "POST", "/v1/orders/"+order.ID+"/refunds", e.Secret, []byte(`{"amount":4500,"reason":"cold"}`),
		"Idempotency-Key", "receipt-e2e-refund")
	if r.Status != http.StatusCreated {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	refunded := mb.Wait(ctx, 2)[1]
	checkReceipt(t, e, refunded, "order.refunded", "ayse@example.com", "45.00 TRY")

	// The server accepted the refund's receipt; its job records that right after.
	for {
		var sent, all int
		if err := e.DB.QueryRow(`SELECT count(*) FILTER (WHERE state = 'sent'), count(*) FROM receipts`).Scan(&sent, &all); err != nil || all != 2 {
			t.Fatalf("receipts: %d sent of %d (%v)", sent, all, err)
		}
		if sent == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("receipts: %d sent of %d", sent, all)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n := len(mb.Messages()); n != 2 {
		t.Errorf("%d messages, want 2", n)
	}
}

// checkReceipt: msg is the receipt of the client's one event of type typ, to, saying amount.
func checkReceipt(t *testing.T, e *apptest.Env, msg receiptstest.Received, typ, to, amount string) {
	t.Helper()
	var ev string
	if err := e.DB.Get(&ev, `SELECT id FROM outbox_events WHERE type = $1 AND client_id = $2`, typ, e.ClientID); err != nil {
		t.Fatalf("the %s event: %v", typ, err)
	}
	m, err := mail.ReadMessage(bytes.NewReader(msg.Data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Header.Get("Message-ID"), "<"+ev+".receipt@kahve.example>"; got != want {
		t.Errorf("%s: Message-ID %q, want %q", typ, got, want)
	}
	if len(msg.To) != 1 || msg.To[0] != to || m.Header.Get("To") != "<"+to+">" {
		t.Errorf("%s: to %v, To %q", typ, msg.To, m.Header.Get("To"))
	}
	if !strings.Contains(string(msg.Data), amount) {
		t.Errorf("%s: the message does not say %s:\n%s", typ, amount, msg.Data)
	}
}
