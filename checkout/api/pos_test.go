package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/apptest"
	"github.com/tekrar/tekrar/internal/config"
)

// sale is one sale of a test batch: a cash sale of qty units of BEANS at 1000, unless
// order is set.
type sale struct {
	key   string
	qty   int64
	order string
}

func (s sale) json() string {
	order := s.order
	if order == "" {
		order = fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"BEANS","name":"Beans","quantity":%d,"unit_amount":1000,"from_stock":true}],
			"amount":%d,"payment":{"method":"cash"}}`, s.qty, s.qty*1000)
	}
	return fmt.Sprintf(`{"idempotency_key":%q,"sold_at":"2026-05-01T09:30:00+03:00","order":%s}`, s.key, order)
}

// batchBody is a batch of register R1 under batchKey.
func batchBody(batchKey string, sales []sale) []byte {
	parts := make([]string, len(sales))
	for i, s := range sales {
		parts[i] = s.json()
	}
	return []byte(fmt.Sprintf(`{"batch_key":%q,"register":{"id":"R1","name":"Front till"},"sales":[%s]}`,
		batchKey, strings.Join(parts, ",")))
}

// cashSales are n cash sales of one unit, keyed prefix-0 … prefix-(n-1).
func cashSales(prefix string, from, to int) []sale {
	var out []sale
	for i := from; i < to; i++ {
		out = append(out, sale{key: fmt.Sprintf("%s-%d", prefix, i), qty: 1})
	}
	return out
}

type saleOutcome struct {
	Index          int             `json:"index"`
	IdempotencyKey string          `json:"idempotency_key"`
	Outcome        string          `json:"outcome"`
	Status         int             `json:"status"`
	Oversold       bool            `json:"oversold"`
	Order          json.RawMessage `json:"order"`
	Problem        json.RawMessage `json:"problem"`
}

func (o saleOutcome) orderID(t testing.TB) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(o.Order, &v); err != nil || v.ID == "" {
		t.Fatalf("sale %d (%s): no order in %+v", o.Index, o.Outcome, o)
	}
	return v.ID
}

func (o saleOutcome) code(t testing.TB) string {
	t.Helper()
	var p struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(o.Problem, &p); err != nil {
		t.Fatalf("sale %d: problem %s: %v", o.Index, o.Problem, err)
	}
	return p.Code
}

func outcomesOf(t testing.TB, r apptest.Response) []saleOutcome {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	var b struct {
		Sales []saleOutcome `json:"sales"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("batch body: %v: %s", err, r.Body)
	}
	return b.Sales
}

func sendBatch(t testing.TB, e *apptest.Env, body []byte) []saleOutcome {
	t.Helper()
	return outcomesOf(t, e.Do(t, "POST", "/v1/pos/sales", e.Secret, body))
}

// wantOutcomes checks each sale's outcome (index → outcome; the rest want def).
func wantOutcomes(t testing.TB, got []saleOutcome, n int, def string, except map[int]string) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d outcomes, want %d", len(got), n)
	}
	for i, o := range got {
		want := def
		if w, ok := except[i]; ok {
			want = w
		}
		if o.Index != i || o.Outcome != want {
			t.Fatalf("sale %d: outcome %q (index %d, %s), want %q", i, o.Outcome, o.Index, o.Problem, want)
		}
	}
}

// TestSalesBatchStorm: the same batch of 200 cash sales, sent by 10 goroutines at once to
// two servers on one database: 200 orders, the stock down by exactly 200, and every
// answer names the same order for each sale, created by exactly one of them.
func TestSalesBatchStorm(t *testing.T) {
	e := apptest.New(t)
	peer := e.Peer(t)
	putProduct(t, e, "BEANS", 1000, 1000)
	body := batchBody("b1", cashSales("storm", 0, 200))
	rs := storm(t, 10, func(i int) (apptest.Response, error) {
		return []*apptest.Env{e, peer}[i%2].Send("POST", "/v1/pos/sales", e.Secret, body)
	})
	created := make([]int, 200)
	ids := make([]string, 200)
	for _, r := range rs {
		for i, o := range outcomesOf(t, r) {
			switch o.Outcome {
			case "created":
				created[i]++
			case "replayed":
			default:
				t.Fatalf("sale %d: %s %s", i, o.Outcome, o.Problem)
			}
			if id := o.orderID(t); ids[i] == "" {
				ids[i] = id
			} else if ids[i] != id {
				t.Fatalf("sale %d: order %s and %s", i, ids[i], id)
			}
		}
	}
	for i, n := range created {
		if n != 1 {
			t.Fatalf("sale %d created %d times", i, n)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM orders o JOIN pos_sales s ON s.order_id = o.id WHERE o.status = 'paid'`); n != 200 {
		t.Fatalf("%d paid sales, want 200", n)
	}
	if n := count(t, e, `SELECT count(*) FROM orders`); n != 200 {
		t.Fatalf("%d orders, want 200", n)
	}
	if s := stockOf(t, e, "BEANS"); s != 800 {
		t.Fatalf("stock %d, want 800", s)
	}
	checkLedger(t, e, "BEANS", 200)
	if n := count(t, e, `SELECT count(*) FROM outbox_events WHERE type = 'order.paid'`); n != 200 {
		t.Fatalf("%d order.paid events, want 200", n)
	}
	// Resent later, whole: every sale replayed, nothing taken.
	wantOutcomes(t, sendBatch(t, e, body), 200, "replayed", nil)
	if s := stockOf(t, e, "BEANS"); s != 800 {
		t.Fatalf("stock %d after the resend, want 800", s)
	}
}

// TestSalesBatchOutcomes: overlapping batches create only the new sales; a sale whose key
// is another sale's is a conflict and the others go through; an invalid sale (the 101st)
// is reported and the others go through; a sale sent twice in one batch is one order.
func TestSalesBatchOutcomes(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 1000)

	wantOutcomes(t, sendBatch(t, e, batchBody("a", cashSales("s", 0, 10))), 10, "created", nil)
	wantOutcomes(t, sendBatch(t, e, batchBody("b", cashSales("s", 5, 15))), 10, "replayed",
		map[int]string{5: "created", 6: "created", 7: "created", 8: "created", 9: "created"})
	if s := stockOf(t, e, "BEANS"); s != 985 {
		t.Fatalf("stock %d after two overlapping batches, want 985", s)
	}

	// A conflict in the middle: key s-3 with another quantity.
	c := cashSales("c", 0, 5)
	c[2] = sale{key: "s-3", qty: 2}
	out := sendBatch(t, e, batchBody("c", c))
	wantOutcomes(t, out, 5, "created", map[int]string{2: "conflict"})
	if code := out[2].code(t); code != "idempotency_key_reused" || out[2].Status != 422 {
		t.Fatalf("conflict: %d %s", out[2].Status, code)
	}

	// The 101st sale is invalid; the 150 others are created.
	v := cashSales("v", 0, 151)
	v[100].qty = 0
	out = sendBatch(t, e, batchBody("v", v))
	wantOutcomes(t, out, 151, "created", map[int]string{100: "invalid"})
	if code := out[100].code(t); code != "validation_failed" || out[100].Status != 422 {
		t.Fatalf("invalid: %d %s", out[100].Status, code)
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'v-100'`); n != 0 {
		t.Fatalf("the invalid sale stored a key")
	}

	// One sale twice in a batch, and a sale naming no product.
	d := []sale{{key: "d-1", qty: 1}, {key: "d-1", qty: 1}, {key: "d-2", order: `{"currency":"TRY","items":[{"sku":"NOPE","name":"x","quantity":1,"unit_amount":5,"from_stock":true}],"amount":5,"payment":{"method":"cash"}}`}}
	out = sendBatch(t, e, batchBody("d", d))
	wantOutcomes(t, out, 3, "created", map[int]string{1: "replayed", 2: "invalid"})
	if out[0].orderID(t) != out[1].orderID(t) || out[2].code(t) != "product_not_found" {
		t.Fatalf("duplicate or unknown sku: %+v", out)
	}

	// A sale whose key is past its retention.
	if _, err := e.DB.Exec(`UPDATE idempotency_keys SET expires_at = created_at WHERE key = 's-0'`); err != nil {
		t.Fatal(err)
	}
	out = sendBatch(t, e, batchBody("x", cashSales("s", 0, 2)))
	wantOutcomes(t, out, 2, "replayed", map[int]string{0: "expired"})
	if code := out[0].code(t); code != "idempotency_key_expired" {
		t.Fatalf("expired: %s", out[0].Problem)
	}

	want := 10 + 5 + 4 + 150 + 1
	if n := count(t, e, `SELECT count(*) FROM pos_sales`); n != want {
		t.Fatalf("%d sales, want %d", n, want)
	}
	if s := stockOf(t, e, "BEANS"); s != 1000-want {
		t.Fatalf("stock %d, want %d", s, 1000-want)
	}
	checkLedger(t, e, "BEANS", want)
}

// TestSalesBatchOversold: sales that happened offline are taken even beyond the level: the
// level stops at 0, the shortfall is the sale's oversold units, and the answer says so.
func TestSalesBatchOversold(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 2)
	out := sendBatch(t, e, batchBody("o", []sale{{key: "o-1", qty: 1}, {key: "o-2", qty: 3}, {key: "o-3", qty: 1}}))
	wantOutcomes(t, out, 3, "created", nil)
	if out[0].Oversold || !out[1].Oversold || !out[2].Oversold {
		t.Fatalf("oversold flags %v %v %v, want false true true", out[0].Oversold, out[1].Oversold, out[2].Oversold)
	}
	if s := stockOf(t, e, "BEANS"); s != 0 {
		t.Fatalf("stock %d, want 0", s)
	}
	if n := count(t, e, `SELECT sum(oversold_units) FROM pos_sales`); n != 3 {
		t.Fatalf("%d units oversold, want 3", n)
	}
	checkLedger(t, e, "BEANS", 2) // o-1 took 1, o-2 the last 1, o-3 nothing
}

// TestSalesBatchCardToken: a card_token sale sent alone with POST /v1/orders and then in a
// batch is one order; a new card_token sale in a batch is charged through the provider.
func TestSalesBatchCardToken(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 10)
	order := string(stockOrderBody("BEANS", 1, 1000))
	if r := e.Do(t, "POST", "/v1/orders", e.Secret, []byte(order), "Idempotency-Key", "k-alone"); r.Status != 201 {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	out := sendBatch(t, e, batchBody("t", []sale{{key: "k-alone", order: order}, {key: "k-new", order: order}}))
	wantOutcomes(t, out, 2, "created", map[int]string{0: "replayed"})
	if n := count(t, e, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != 2 {
		t.Fatalf("%d paid orders, want 2", n)
	}
	if n := count(t, e, `SELECT count(*) FROM payments WHERE status = 'succeeded'`); n != 2 {
		t.Fatalf("%d payments, want 2", n)
	}
	if s := stockOf(t, e, "BEANS"); s != 8 {
		t.Fatalf("stock %d, want 8", s)
	}
	wantOutcomes(t, sendBatch(t, e, batchBody("t", []sale{{key: "k-alone", order: order}, {key: "k-new", order: order}})), 2, "replayed", nil)
}

// TestSalesBatchLimits: a batch over the limits is refused whole, and nothing runs.
func TestSalesBatchLimits(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 1000)
	r := e.Do(t, "POST", "/v1/pos/sales", e.Secret, batchBody("big", cashSales("big", 0, 501)))
	p := problemOf(t, r, 413, "batch_too_large")
	if p["max_sales"] != float64(500) {
		t.Fatalf("problem %s", r.Body)
	}
	pad := strings.Repeat("x", 4<<20)
	r = e.Do(t, "POST", "/v1/pos/sales", e.Secret, []byte(`{"batch_key":"`+pad+`"}`))
	problemOf(t, r, 413, "batch_too_large")
	r = e.Do(t, "POST", "/v1/pos/sales", e.Secret, []byte(`{"batch_key":"x","register":{"id":"R1","name":""},"sales":[]}`))
	problemOf(t, r, 422, "validation_failed")
	for _, table := range []string{"idempotency_keys", "orders", "registers"} {
		if n := count(t, e, `SELECT count(*) FROM `+table); n != 0 {
			t.Fatalf("%d rows in %s after refused batches", n, table)
		}
	}
}

// TestSalesBatchCashRefundRefused: a sale paid in cash has no provider charge, so a refund
// through the API is refused (order_not_refundable), and nothing is stored.
func TestSalesBatchCashRefundRefused(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "BEANS", 1000, 10)
	out := sendBatch(t, e, batchBody("r", []sale{{key: "r-1", qty: 1}}))
	wantOutcomes(t, out, 1, "created", nil)
	r := e.Do(t, "POST", "/v1/orders/"+out[0].orderID(t)+"/refunds", e.Secret, []byte(`{"amount":1000}`), "Idempotency-Key", "refund-1")
	problemOf(t, r, 409, "order_not_refundable")
	if n := count(t, e, `SELECT count(*) FROM refunds`) + count(t, e, `SELECT count(*) FROM idempotency_keys WHERE key = 'refund-1'`); n != 0 {
		t.Fatalf("a refused refund stored %d rows", n)
	}
}

// saleOrder is a sale's order of qty units of sku at 1000 each, paid with pay (a payment
// object: a card token, cash, card_present).
func saleOrder(sku string, qty int64, pay string) string {
	return fmt.Sprintf(`{"currency":"TRY","items":[{"sku":%q,"name":"Lamp","quantity":%d,"unit_amount":1000,"from_stock":true}],
		"amount":%d,"payment":%s}`, sku, qty, qty*1000, pay)
}

// storedAnswer is the response body stored with a sale's key.
func storedAnswer(t testing.TB, e *apptest.Env, key string) []byte {
	t.Helper()
	var b []byte
	if err := e.DB.Get(&b, `SELECT response_body FROM idempotency_keys WHERE key = $1`, key); err != nil {
		t.Fatalf("stored answer of %s: %v", key, err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatalf("stored answer of %s: %v", key, err)
	}
	return c.Bytes()
}

// sameAnswer fails unless two outcomes of one sale say the same thing byte for byte: all
// but their index and outcome.
func sameAnswer(t testing.TB, what string, a, b saleOutcome) {
	t.Helper()
	if a.IdempotencyKey != b.IdempotencyKey || a.Status != b.Status || a.Oversold != b.Oversold ||
		!bytes.Equal(a.Order, b.Order) || !bytes.Equal(a.Problem, b.Problem) {
		t.Fatalf("%s: answers differ:\n%d %v %s%s\n%d %v %s%s", what, a.Status, a.Oversold, a.Order, a.Problem,
			b.Status, b.Oversold, b.Order, b.Problem)
	}
}

// TestSalesBatchDeclinedTwice: a declining card sale sent twice in one batch is one
// refusal: the second is replayed, with the stored answer of the first.
func TestSalesBatchDeclinedTwice(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "LAMP", 1000, 5)
	declining := saleOrder("LAMP", 1, `{"card_token":"tok_declined"}`)
	out := sendBatch(t, e, batchBody("d", []sale{{key: "d-1", order: declining}, {key: "d-1", order: declining}}))
	wantOutcomes(t, out, 2, "declined", map[int]string{1: "replayed"})
	if out[0].Status != 402 || out[0].code(t) != "payment_declined" {
		t.Fatalf("declined: %d %s", out[0].Status, out[0].Problem)
	}
	sameAnswer(t, "in-batch duplicate", out[0], out[1])
	if !bytes.Equal(out[0].Problem, storedAnswer(t, e, "d-1")) {
		t.Fatalf("answer %s, stored %s", out[0].Problem, storedAnswer(t, e, "d-1"))
	}
	if n := count(t, e, `SELECT count(*) FROM psp_charges`); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if n := count(t, e, `SELECT refused * 10 + replayed FROM pos_batch_arrivals`); n != 11 {
		t.Fatalf("arrival counted %d refused and %d replayed, want 1 and 1", n/10, n%10)
	}
}

// TestSalesBatchDeclineGivesBackStock: stock is held only by sales that end sold. A
// declined sale gives back what it took, in the statement that records the decline, so
// that the till's next step (another payment, a new sale with a new key) takes it once;
// an order of POST /v1/orders declined does the same.
func TestSalesBatchDeclineGivesBackStock(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "LAMP", 1000, 5)
	out := sendBatch(t, e, batchBody("d", []sale{{key: "d-1", order: saleOrder("LAMP", 1, `{"card_token":"tok_declined"}`)}}))
	wantOutcomes(t, out, 1, "declined", nil)
	if s := stockOf(t, e, "LAMP"); s != 5 {
		t.Fatalf("stock %d after a declined sale, want 5", s)
	}
	out = sendBatch(t, e, batchBody("c", []sale{{key: "c-1", order: saleOrder("LAMP", 1, `{"method":"cash"}`)}}))
	wantOutcomes(t, out, 1, "created", nil)
	if s := stockOf(t, e, "LAMP"); s != 4 {
		t.Fatalf("stock %d after the declined sale and a cash sale of one, want 4", s)
	}
	// The same through POST /v1/orders, and a resend of the declined sale gives back nothing more.
	problemOf(t, postOrder(t, e, e.Secret, "o-1", []byte(saleOrder("LAMP", 2, `{"card_token":"tok_declined"}`))), 402, "payment_declined")
	wantOutcomes(t, sendBatch(t, e, batchBody("d", []sale{{key: "d-1", order: saleOrder("LAMP", 1, `{"card_token":"tok_declined"}`)}})), 1, "replayed", nil)
	if s := stockOf(t, e, "LAMP"); s != 4 {
		t.Fatalf("stock %d after a declined order, want 4", s)
	}
	checkLedger(t, e, "LAMP", 3)
	if n := count(t, e, `SELECT count(*) FROM stock_movements m JOIN orders o ON o.id = m.order_id
		WHERE m.reason = 'release' AND o.status = 'declined'`); n != 2 {
		t.Fatalf("%d release movements, want 2 (one per declined order)", n)
	}
}

// TestSalesBatchCanceledGivesBackStock: a card sale whose charge never happened (the
// provider failed, and the till did not resend it) holds its stock while its outcome is
// unknown; the completer cancels it, and the cancel gives the stock back. The resend is
// answered the stored cancel.
func TestSalesBatchCanceledGivesBackStock(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "LAMP", 1000, 5)
	body := batchBody("f", []sale{{key: "f-1", order: saleOrder("LAMP", 1, `{"card_token":"tok_fail"}`)}})
	wantOutcomes(t, sendBatch(t, e, body), 1, "failed", nil)
	if s := stockOf(t, e, "LAMP"); s != 4 {
		t.Fatalf("stock %d while the charge is unknown, want 4", s)
	}
	e.Clock.Advance(2 * time.Minute)
	if res := complete(t, e); res.Canceled != 1 {
		t.Fatalf("completer: %+v", res)
	}
	if s := stockOf(t, e, "LAMP"); s != 5 {
		t.Fatalf("stock %d after the sale was canceled, want 5", s)
	}
	out := sendBatch(t, e, body)
	wantOutcomes(t, out, 1, "replayed", nil)
	if out[0].Status != 409 || out[0].code(t) != "payment_abandoned" {
		t.Fatalf("resend: %d %s", out[0].Status, out[0].Problem)
	}
	checkLedger(t, e, "LAMP", 1)
}

// TestSalesBatchTakeoverKeepsOversold: a card sale beyond the stock whose replica died
// during the charge is taken over by a resend after the lease; its answer is built from
// what was stored, so it says oversold as the sale's row does.
func TestSalesBatchTakeoverKeepsOversold(t *testing.T) {
	stall, resume := make(chan struct{}), make(chan struct{})
	var stalled atomic.Bool
	e := apptest.NewWith(t, func(point string) {
		if point == checkout.CrashAfterProvider && stalled.CompareAndSwap(false, true) {
			close(stall)
			<-resume // the replica is dead: it never goes on while the test looks
		}
	}, func(c *config.Server) { c.Lease = time.Minute })
	putProduct(t, e, "LAMP", 1000, 0)
	body := batchBody("k", []sale{{key: "k-1", order: saleOrder("LAMP", 1, `{"card_token":"tok_visa"}`)}})
	dead := make(chan apptest.Response, 1)
	go func() {
		r, _ := e.Send("POST", "/v1/pos/sales", e.Secret, body)
		dead <- r
	}()
	<-stall
	t.Cleanup(func() { close(resume); <-dead })
	e.Clock.Advance(5 * time.Minute) // past the dead replica's lease
	out := sendBatch(t, e, body)
	wantOutcomes(t, out, 1, "created", nil)
	if n := count(t, e, `SELECT oversold_units FROM pos_sales`); n != 1 {
		t.Fatalf("%d units oversold, want 1", n)
	}
	if !out[0].Oversold {
		t.Fatalf("the sale taken over lost its oversold flag: %+v", out[0])
	}
	again := sendBatch(t, e, body)
	wantOutcomes(t, again, 1, "replayed", nil)
	sameAnswer(t, "replay of the sale taken over", out[0], again[0])
}

// TestSalesBatchCreatedAtAsStored: the stored answer of a sale paid at the register
// carries its order's created_at as the database keeps it, the microsecond included, as
// GET /v1/orders/{id} does.
func TestSalesBatchCreatedAtAsStored(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "LAMP", 1000, 10)
	for key, pay := range map[string]string{"t-cash": `{"method":"cash"}`, "t-present": `{"method":"card_present","reference":"term-1"}`} {
		out := sendBatch(t, e, batchBody("t", []sale{{key: key, order: saleOrder("LAMP", 1, pay)}}))
		wantOutcomes(t, out, 1, "created", nil)
		var answer orderJSON
		if err := json.Unmarshal(out[0].Order, &answer); err != nil {
			t.Fatal(err)
		}
		var stored time.Time
		if err := e.DB.Get(&stored, `SELECT created_at FROM orders WHERE public_id = $1`, answer.ID); err != nil {
			t.Fatal(err)
		}
		got, err := time.Parse(time.RFC3339Nano, answer.CreatedAt)
		if err != nil || !got.Equal(stored) {
			t.Fatalf("%s: the answer's created_at %s, the order's %s", pay, answer.CreatedAt, stored.UTC().Format(time.RFC3339Nano))
		}
		if read := decodeOrder(t, e.Do(t, "GET", "/v1/orders/"+answer.ID, e.Secret, nil)); read.CreatedAt != answer.CreatedAt {
			t.Fatalf("%s: the answer's created_at %s, GET's %s", pay, answer.CreatedAt, read.CreatedAt)
		}
		if !bytes.Equal(out[0].Order, storedAnswer(t, e, key)) {
			t.Fatalf("%s: answered %s, stored %s", pay, out[0].Order, storedAnswer(t, e, key))
		}
	}
}

// TestSalesBatchReplayIsTheFirstAnswer: every outcome of a sale, answered again (the same
// key twice in the batch, the batch resent, the key alone in another batch), says what
// its first answer said, byte for byte: created and declined ones are replayed, the
// others keep their outcome.
func TestSalesBatchReplayIsTheFirstAnswer(t *testing.T) {
	e := apptest.New(t)
	putProduct(t, e, "LAMP", 1000, 1)
	sales := []sale{
		{key: "cash", order: saleOrder("LAMP", 1, `{"method":"cash"}`)},
		{key: "cash-over", order: saleOrder("LAMP", 2, `{"method":"cash"}`)},
		{key: "present", order: saleOrder("LAMP", 1, `{"method":"card_present","reference":"term-9"}`)},
		{key: "card", order: saleOrder("LAMP", 1, `{"card_token":"tok_visa"}`)},
		{key: "declined", order: saleOrder("LAMP", 1, `{"card_token":"tok_declined"}`)},
		{key: "invalid", order: saleOrder("LAMP", 0, `{"method":"cash"}`)},
		{key: "unknown", order: saleOrder("NOPE", 1, `{"method":"cash"}`)},
	}
	firstOutcome := []string{"created", "created", "created", "created", "declined", "invalid", "invalid"}
	batch := append(append([]sale{}, sales...), sales...)                                      // each key twice
	batch = append(batch, sale{key: "cash", order: saleOrder("LAMP", 3, `{"method":"cash"}`)}) // another sale, same key
	body := batchBody("r", batch)
	first := sendBatch(t, e, body)
	n := len(sales)
	except := map[int]string{2 * n: "conflict"}
	for i, o := range firstOutcome {
		except[i] = o
		except[n+i] = map[string]string{"created": "replayed", "declined": "replayed"}[o]
		if except[n+i] == "" {
			except[n+i] = o
		}
	}
	wantOutcomes(t, first, 2*n+1, "", except)
	if first[0].Oversold || !first[1].Oversold || !first[2].Oversold || !first[3].Oversold {
		t.Fatalf("oversold flags %v %v %v %v, want false true true true", first[0].Oversold, first[1].Oversold,
			first[2].Oversold, first[3].Oversold)
	}
	for i := range sales[:5] {
		stored := first[i].Order
		if first[i].Status >= 300 {
			stored = first[i].Problem
		}
		if !bytes.Equal(stored, storedAnswer(t, e, sales[i].key)) {
			t.Fatalf("%s: answered %s, stored %s", sales[i].key, stored, storedAnswer(t, e, sales[i].key))
		}
	}
	again := sendBatch(t, e, body)
	for i := range first {
		want := except[i]
		if want == "created" || want == "declined" {
			want = "replayed"
		}
		if again[i].Outcome != want {
			t.Fatalf("resent sale %d: %s, want %s (%s)", i, again[i].Outcome, want, again[i].Problem)
		}
		sameAnswer(t, fmt.Sprintf("sale %d resent", i), first[i], again[i])
		if i < n {
			sameAnswer(t, fmt.Sprintf("sale %d twice in the batch", i), first[i], first[n+i])
		}
	}
	alone := sendBatch(t, e, batchBody("a", batch[2*n:]))
	wantOutcomes(t, alone, 1, "conflict", nil)
	sameAnswer(t, "the conflict alone", first[2*n], alone[0])
}
