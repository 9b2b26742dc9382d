package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// TestRefusedReceiptsCounted: a register's batch of five cash sales with customer e-mails,
// against a daily cap of 3 receipts: every sale is created (a receipt never refuses a sale),
// the first three get their receipts, the other two are stored refused (daily_cap), and
// tekrar_receipts_refused_total counts them by reason, both reasons at 0 before anything.
func TestRefusedReceiptsCounted(t *testing.T) {
	e := apptest.New(t, func(c *config.Server) { c.ReceiptsPerDay, c.OutboxPoll = 3, 50*time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	done := make(chan struct{})
	go func() { e.App.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	_, fams := scrape(t, e)
	for _, r := range []string{"rate_limited", "daily_cap"} {
		if !has(fams, "tekrar_receipts_refused_total", "reason", r) {
			t.Errorf("before any receipt: no tekrar_receipts_refused_total{reason=%s}", r)
		}
	}
	var sales []string
	for i := range 5 {
		sales = append(sales, fmt.Sprintf(`{"idempotency_key":"rc-%d","sold_at":"2026-05-01T09:30:00+03:00","order":{"currency":"TRY",
			"items":[{"sku":"TEA","name":"Tea","quantity":1,"unit_amount":1}],"amount":1,"payment":{"method":"cash"},
			"customer":{"email":"customer%d@example.com"}}}`, i, i))
	}
	for i, o := range sellBatch(t, e, posBatch("R1", "rc", sales...)) {
		if o != "created" {
			t.Fatalf("sale %d: %s", i, o)
		}
	}
	for count(t, e, `SELECT count(*) FROM receipts`) < 5 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d receipts of 5", count(t, e, `SELECT count(*) FROM receipts`))
		case <-time.After(20 * time.Millisecond):
		}
	}
	if kept, refused := count(t, e, `SELECT count(*) FROM receipts WHERE state = 'kept'`),
		count(t, e, `SELECT count(*) FROM receipts WHERE state = 'refused' AND refused_reason = 'daily_cap'`); kept != 3 || refused != 2 {
		t.Errorf("%d receipts kept, %d refused, want 3 and 2", kept, refused)
	}
	if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != 5 {
		t.Errorf("%d paid orders, want 5", n)
	}
	_, fams = scrape(t, e)
	if got := value(fams, "tekrar_receipts_refused_total", "reason", "daily_cap"); got != 2 {
		t.Errorf("tekrar_receipts_refused_total{reason=daily_cap} = %v, want 2", got)
	}
	if got := value(fams, "tekrar_receipts_refused_total", "reason", "rate_limited"); got != 0 {
		t.Errorf("tekrar_receipts_refused_total{reason=rate_limited} = %v, want 0", got)
	}
}
