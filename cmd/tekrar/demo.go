package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/clients"
)

// The demo kiosk keeps its keys for one minute, so that expirations and late retries show
// up in the console within minutes of `tekrar dev --demo`.
const (
	demoKioskName   = "demo kiosk"
	demoKioskSecret = "tekrar_sk_demo_kiosk_local_only"
)

func seedDemoKiosk(ctx context.Context, db *sqlx.DB) error {
	h := clients.Hash(demoKioskSecret)
	_, err := db.ExecContext(ctx, `
		INSERT INTO clients (name, secret_hash, key_ttl, tombstone_grace)
		VALUES ($1, $2, interval '1 minute', interval '1 hour') ON CONFLICT (secret_hash) DO NOTHING`, demoKioskName, h[:])
	if err != nil {
		return fmt.Errorf("seed demo kiosk: %w", err)
	}
	return nil
}

// demoTraffic sends what a day of a small coffee chain looks like, compressed: first
// payments, retries that replay, a key reused for another amount, a request sent while its
// first is in flight, a declined card, a provider timeout that resolves on retry, a double
// tap (two keys, same purchase) that idempotency cannot catch, and keys that expire and are
// then retried late.
func demoTraffic(ctx context.Context, base string, logger *slog.Logger) {
	d := &demo{base: base, hc: &http.Client{Timeout: 30 * time.Second}, run: fmt.Sprintf("%04x", rand.IntN(1<<16))}
	items := []struct {
		sku, name string
		price     int64
	}{{"LATTE", "Latte", 4500}, {"SIMIT", "Simit", 1500}, {"CAY", "Çay", 1000}, {"MOCHA", "Mocha", 5500}}
	customers := []string{"cus_ayse", "cus_mehmet", "cus_elif", "cus_can", "cus_zeynep"}
	body := func(i int, token string) []byte {
		it := items[i%len(items)]
		q := int64(1 + i%3)
		cus := customers[i%len(customers)]
		return fmt.Appendf(nil, `{"currency":"TRY","items":[{"sku":%q,"name":%q,"quantity":%d,"unit_amount":%d}],"amount":%d,`+
			`"payment":{"card_token":%q},"customer":{"id":%q,"email":"%s@example.com"},"metadata":{"device_id":"pos-%d"}}`,
			it.sku, it.name, q, it.price, q*it.price, token, cus, cus[4:], 1+i%4)
	}
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		key := d.key("sale", i)
		b := body(i, "tok_visa")
		d.pay(demoClientSecret, key, b)
		if i%3 == 0 { // the phone timed out and retried
			d.pay(demoClientSecret, key, b)
		}
	}
	d.pay(demoClientSecret, d.key("sale", 5), body(6, "tok_visa"))         // a key reused for another purchase
	d.pay(demoClientSecret, d.key("declined", 0), body(7, "tok_declined")) // a declined card
	d.pay(demoClientSecret, d.key("timeout", 0), body(8, "tok_timeout"))   // charged, answer lost...
	d.pay(demoClientSecret, d.key("timeout", 0), body(8, "tok_timeout"))   // ...and found on retry
	wg.Add(1)
	go func() { defer wg.Done(); d.pay(demoClientSecret, d.key("slow", 0), body(9, "tok_slow")) }()
	time.Sleep(300 * time.Millisecond)
	d.pay(demoClientSecret, d.key("slow", 0), body(9, "tok_slow")) // while the first is in flight
	wg.Wait()
	d.pay(demoClientSecret, d.key("tap", 1), body(10, "tok_mastercard")) // a double tap: two keys,
	d.pay(demoClientSecret, d.key("tap", 2), body(10, "tok_mastercard")) // one purchase
	for i := 0; i < 6; i++ {                                             // kiosk keys expire after a minute
		d.pay(demoKioskSecret, d.key("kiosk", i), body(20+i, "tok_visa"))
	}
	d.register()
	logger.Info("demo traffic sent; kiosk keys expire in a minute, and are retried late in three")
	select {
	case <-ctx.Done():
		return
	case <-time.After(3 * time.Minute):
	}
	for i := 0; i < 2; i++ { // a POS that was offline resends its queue
		d.pay(demoKioskSecret, d.key("kiosk", i), body(20+i, "tok_visa"))
	}
}

type demo struct {
	base, run string
	hc        *http.Client
}

func (d *demo) key(kind string, i int) string { return fmt.Sprintf("demo-%s-%s-%d", d.run, kind, i) }

// register is a till that was offline: it sells five bags of beans of which the shop has
// three in stock (two are oversold), sends its queue, loses the answer and sends it again.
func (d *demo) register() {
	sku := "BEANS-" + d.run
	d.send("PUT", "/v1/products/"+sku, demoClientSecret, "",
		fmt.Appendf(nil, `{"name":"Beans","price":12000,"currency":"TRY","stock":3}`))
	var sales []byte
	for i := range 5 {
		if i > 0 {
			sales = append(sales, ',')
		}
		sales = fmt.Appendf(sales, `{"idempotency_key":%q,"sold_at":%q,"order":{"currency":"TRY","amount":12000,`+
			`"items":[{"sku":%q,"name":"Beans","quantity":1,"unit_amount":12000,"from_stock":true}],"payment":{"method":"cash"}}}`,
			d.key("till", i), time.Now().Add(-time.Duration(5-i)*time.Minute).UTC().Format(time.RFC3339), sku)
	}
	batch := fmt.Appendf(nil, `{"batch_key":%q,"register":{"id":"till-1","name":"Front till"},"sales":[%s]}`, d.key("queue", 0), sales)
	d.send("POST", "/v1/pos/sales", demoClientSecret, "", batch)
	d.send("POST", "/v1/pos/sales", demoClientSecret, "", batch)
}

func (d *demo) pay(secret, key string, body []byte) { d.send("POST", "/v1/orders", secret, key, body) }

// send makes one request of the demo and drops the answer.
func (d *demo) send(method, path, secret, key string, body []byte) {
	req, err := http.NewRequest(method, d.base+path, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("User-Agent", "tekrar-demo-pos/1.0")
	resp, err := d.hc.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
