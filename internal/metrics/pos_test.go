package metrics_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/apptest"
)

// posSale is a cash sale of qty units of BEANS under key.
func posSale(key string, qty int) string {
	return fmt.Sprintf(`{"idempotency_key":%q,"sold_at":"2026-05-01T09:30:00+03:00","order":{"currency":"TRY",
		"items":[{"sku":"BEANS","name":"Beans","quantity":%d,"unit_amount":1000,"from_stock":true}],
		"amount":%d,"payment":{"method":"cash"}}}`, key, qty, qty*1000)
}

// posBatch is register till's batch batchKey of sales.
func posBatch(register, batchKey string, sales ...string) []byte {
	return []byte(fmt.Sprintf(`{"batch_key":%q,"register":{"id":%q,"name":"Front till"},"sales":[%s]}`,
		register, batchKey, strings.Join(sales, ",")))
}

// sellBatch sends a batch and returns its sales' outcomes.
func sellBatch(t *testing.T, e *apptest.Env, body []byte) []string {
	t.Helper()
	r := e.Do(t, "POST", "/v1/pos/sales", e.Secret, body)
	var b struct {
		Sales []struct {
			Outcome string `json:"outcome"`
		} `json:"sales"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &b) != nil {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	var out []string
	for _, s := range b.Sales {
		out = append(out, s.Outcome)
	}
	return out
}

// TestPOSSalesCounted sends a register's batch with new, repeated, oversold, invalid and
// conflicting sales, then resends it: each sale counts once under its outcome, and the
// resent batch counts as replayed, not created. The created and oversold counts match the
// rows in pos_sales.
func TestPOSSalesCounted(t *testing.T) {
	e := apptest.New(t)
	if r := e.Do(t, "PUT", "/v1/products/BEANS", e.Secret, []byte(`{"name":"Beans","price":1000,"currency":"TRY","stock":2}`)); r.Status >= 300 {
		t.Fatalf("product: %d %s", r.Status, r.Body)
	}
	client := fmt.Sprint(e.ClientID)
	_, fams := scrape(t, e)
	for _, o := range []string{"created", "replayed", "conflict", "expired", "declined", "invalid", "in_progress", "failed"} {
		if !has(fams, "tekrar_pos_sales_total", "outcome", o) {
			t.Errorf("before any batch: no tekrar_pos_sales_total{outcome=%s}", o)
		}
	}

	// p-1 takes 1 of the 2 units, p-2 the other and oversells 2, p-3 oversells 1; p-1 again
	// in the batch replays; p-4 sells no unit (invalid).
	first := posBatch("R1", "b-1", posSale("p-1", 1), posSale("p-2", 3), posSale("p-3", 1), posSale("p-1", 1), posSale("p-4", 0))
	if got := fmt.Sprint(sellBatch(t, e, first)); got != "[created created created replayed invalid]" {
		t.Fatalf("first batch: %s", got)
	}
	if got := fmt.Sprint(sellBatch(t, e, first)); got != "[replayed replayed replayed replayed invalid]" {
		t.Fatalf("resent: %s", got)
	}
	// p-2's key with another sale.
	if got := fmt.Sprint(sellBatch(t, e, posBatch("R2", "b-2", posSale("p-2", 2)))); got != "[conflict]" {
		t.Fatalf("conflict: %s", got)
	}

	text, fams := scrape(t, e)
	want := map[string]float64{"created": 3, "replayed": 5, "invalid": 2, "conflict": 1, "expired": 0,
		"declined": 0, "in_progress": 0, "failed": 0}
	for o, n := range want {
		if got := value(fams, "tekrar_pos_sales_total", "outcome", o); got != n {
			t.Errorf("tekrar_pos_sales_total{outcome=%s} = %v, want %v", o, got, n)
		}
	}
	if got, rows := value(fams, "tekrar_pos_sales_total", "outcome", "created"), count(t, e, `SELECT count(*) FROM pos_sales`); got != float64(rows) {
		t.Errorf("created %v, pos_sales rows %d", got, rows)
	}
	if got, rows := value(fams, "tekrar_pos_oversold_sales_total"), count(t, e, `SELECT count(*) FROM pos_sales WHERE oversold_units > 0`); got != 2 || rows != 2 {
		t.Errorf("tekrar_pos_oversold_sales_total = %v, oversold rows %d, want 2", got, rows)
	}
	if got := value(fams, "tekrar_pos_batches_total", "client", client); got != 3 {
		t.Errorf("tekrar_pos_batches_total{client=%s} = %v, want 3", client, got)
	}
	for _, s := range []string{"R1", "R2", "b-1", "p-1", "ord_"} {
		if strings.Contains(text, `"`+s) {
			t.Errorf("the scrape names %q", s)
		}
	}
}

// TestPOSDeclinedTwiceCountedOnce: a declining card sale sent twice in one batch is one
// refusal: counted once as declined, and once as replayed.
func TestPOSDeclinedTwiceCountedOnce(t *testing.T) {
	e := apptest.New(t)
	if r := e.Do(t, "PUT", "/v1/products/BEANS", e.Secret, []byte(`{"name":"Beans","price":1000,"currency":"TRY","stock":2}`)); r.Status >= 300 {
		t.Fatalf("product: %d %s", r.Status, r.Body)
	}
	declining := `{"idempotency_key":"d-1","sold_at":"2026-05-01T09:30:00+03:00","order":{"currency":"TRY",
		"items":[{"sku":"BEANS","name":"Beans","quantity":1,"unit_amount":1000,"from_stock":true}],
		"amount":1000,"payment":{"card_token":"tok_declined"}}}`
	if got := fmt.Sprint(sellBatch(t, e, posBatch("R1", "b-1", declining, declining))); got != "[declined replayed]" {
		t.Fatalf("batch: %s", got)
	}
	_, fams := scrape(t, e)
	for o, n := range map[string]float64{"declined": 1, "replayed": 1, "created": 0} {
		if got := value(fams, "tekrar_pos_sales_total", "outcome", o); got != n {
			t.Errorf("tekrar_pos_sales_total{outcome=%s} = %v, want %v", o, got, n)
		}
	}
}
