package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestSalesBatchKilledHalfWay: a register's batch (200 cash sales, then 40 card_token
// sales charged slowly) is sent to a `tekrar serve` that is SIGKILLed once some of the card
// sales are paid; the batch is then resent, whole, to a second server until no sale is
// left to retry. Every sale is one order, the stock is down by exactly the units sold,
// and each card sale was charged once at the provider.
func TestSalesBatchKilledHalfWay(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	ports := freePorts(t, 2)
	extra := []string{"TEKRAR_LEASE=2s", "TEKRAR_SANDBOX_SLOW_DELAY=300ms", "TEKRAR_LOG_LEVEL=warn"}
	victim, victimBase := startServe(t, dbURL, ports[0], extra...)
	_, base := startServe(t, dbURL, ports[1], extra...)
	secret := newClientSecret(t, dbURL, "till app")
	c := newHTTPClient()
	r, err := send(c, "PUT", victimBase+"/v1/products/BEANS", secret,
		[]byte(`{"name":"Beans","price":1000,"currency":"TRY","stock":10000}`))
	if err != nil || r.Status != 201 {
		t.Fatalf("put product: %v %d %s", err, r.Status, r.Body)
	}

	const cash, card = 200, 40
	var sales []string
	for i := range cash + card {
		pay := `{"method":"cash"}`
		if i >= cash {
			pay = `{"card_token":"tok_slow"}`
		}
		sales = append(sales, fmt.Sprintf(`{"idempotency_key":"sale-%d","sold_at":"2026-05-01T09:30:00Z","order":
			{"currency":"TRY","items":[{"sku":"BEANS","name":"Beans","quantity":1,"unit_amount":1000,"from_stock":true}],
			 "amount":1000,"payment":%s}}`, i, pay))
	}
	body := []byte(`{"batch_key":"q1","register":{"id":"R1","name":"Till"},"sales":[` + strings.Join(sales, ",") + `]}`)

	cut := make(chan error, 1)
	go func() {
		_, err := send(c, "POST", victimBase+"/v1/pos/sales", secret, body)
		cut <- err
	}()
	waitUntil(t, 30*time.Second, "some card sales paid", func() bool {
		return countRows(t, db, `SELECT count(*) FROM payments`) >= 8
	})
	victim.signal(t, syscall.SIGKILL)
	if err := <-cut; err == nil {
		t.Fatalf("the killed server answered the batch")
	}
	victim.wait(t, 10*time.Second)
	before := countRows(t, db, `SELECT count(*) FROM pos_sales`)
	if before == 0 || before >= cash+card {
		t.Fatalf("%d sales stored when the server was killed: not half way", before)
	}

	// Resend the whole batch until every sale is created or replayed.
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatalf("sales still to retry after %d resends", round)
		}
		r, err := send(c, "POST", base+"/v1/pos/sales", secret, body)
		if err != nil || r.Status != 200 {
			t.Fatalf("resend: %v %d %s", err, r.Status, r.Body)
		}
		var b struct {
			Sales []struct {
				Outcome string `json:"outcome"`
			} `json:"sales"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		again := 0
		for i, s := range b.Sales {
			switch s.Outcome {
			case "created", "replayed":
			case "in_progress", "failed":
				again++
			default:
				t.Fatalf("sale %d: %s", i, s.Outcome)
			}
		}
		if again == 0 {
			break
		}
	}
	checks := []struct {
		what, query string
		want        int
	}{
		{"orders", `SELECT count(*) FROM orders`, cash + card},
		{"paid orders of the register", `SELECT count(*) FROM orders o JOIN pos_sales s ON s.order_id = o.id WHERE o.status = 'paid'`, cash + card},
		{"keys", `SELECT count(*) FROM idempotency_keys WHERE state = 'completed'`, cash + card},
		{"stock", `SELECT stock FROM products`, 10000 - cash - card},
		{"sale movements", `SELECT count(*) FROM stock_movements WHERE reason = 'sale'`, cash + card},
		{"movements' sum", `SELECT sum(delta) FROM stock_movements`, 10000 - cash - card},
		{"payments", `SELECT count(*) FROM payments WHERE status = 'succeeded'`, card},
		{"provider charges", `SELECT count(*) FROM psp_charges WHERE status = 'succeeded'`, card},
		{"order.paid events", `SELECT count(*) FROM outbox_events WHERE type = 'order.paid'`, cash + card},
	}
	for _, c := range checks {
		if got := countRows(t, db, c.query); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
}
