package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
)

// BenchmarkSalesBatch measures 500 new sales of a register, each one unit from stock, in
// sales per second: sent as one batch (POST /v1/pos/sales, cash: claimed in chunks of 100,
// a few statements per chunk), as 500 batches of one sale, and as 500 POST /v1/orders
// (card_token, charged through the in-process sandbox provider: the path a till without
// batches would take). The ratios, from one run, are the figure.
//
//	go test -run '^$' -bench SalesBatch -benchtime 5x ./checkout/api/
func BenchmarkSalesBatch(b *testing.B) {
	e := apptest.New(b)
	if r := putProduct(b, e, "BEANS", 1000, 1_000_000_000); r.Status != http.StatusCreated {
		b.Fatalf("put product: %d %s", r.Status, r.Body)
	}
	const n = 500
	run := 0
	sales := func(payment string) []string {
		run++
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(`{"idempotency_key":"bench-%d-%d","sold_at":"2026-05-01T09:30:00Z","order":
				{"currency":"TRY","items":[{"sku":"BEANS","name":"Beans","quantity":1,"unit_amount":1000,"from_stock":true}],
				 "amount":1000,"payment":%s}}`, run, i, payment)
		}
		return out
	}
	batch := func(s []string) []byte {
		return []byte(`{"batch_key":"bench","register":{"id":"R1","name":"Till"},"sales":[` + strings.Join(s, ",") + `]}`)
	}
	measure := func(b *testing.B, send func(b *testing.B)) {
		var spent time.Duration
		for b.Loop() {
			start := time.Now()
			send(b)
			spent += time.Since(start)
		}
		b.ReportMetric(float64(n*b.N)/spent.Seconds(), "sales/s")
	}
	b.Run("batch_of_500", func(b *testing.B) {
		measure(b, func(b *testing.B) {
			body := batch(sales(`{"method":"cash"}`))
			if r := e.Do(b, "POST", "/v1/pos/sales", e.Secret, body); r.Status != http.StatusOK || strings.Count(string(r.Body), `"created"`) != n {
				b.Fatalf("batch: %d", r.Status)
			}
		})
	})
	b.Run("500_batches_of_1", func(b *testing.B) {
		measure(b, func(b *testing.B) {
			for _, s := range sales(`{"method":"cash"}`) {
				if r := e.Do(b, "POST", "/v1/pos/sales", e.Secret, batch([]string{s})); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"created"`) {
					b.Fatalf("batch of one: %d %s", r.Status, r.Body)
				}
			}
		})
	})
	b.Run("500_orders", func(b *testing.B) {
		measure(b, func(b *testing.B) {
			run++
			for i := range n {
				r := e.Do(b, "POST", "/v1/orders", e.Secret, stockOrderBody("BEANS", 1, 1000), "Idempotency-Key", fmt.Sprintf("order-%d-%d", run, i))
				if r.Status != http.StatusCreated {
					b.Fatalf("order: %d %s", r.Status, r.Body)
				}
			}
		})
	})
}
