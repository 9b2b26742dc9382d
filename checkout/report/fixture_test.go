package report

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
)

// at0 is the fixture's "now"; every row is placed relative to it.
var at0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Items of the fixture's orders.
const (
	itemsLatte = `[{"sku":"LATTE","name":"Latte","quantity":2,"unit_amount":2250}]`
	itemsTea   = `[{"sku":"TEA","name":"Tea","quantity":3,"unit_amount":1500}]`
)

// consoleFixture is the console's test data, with ids by name.
type consoleFixture struct {
	t      *testing.T
	db     *sqlx.DB
	shop   int64 // client "shop app"
	pos    int64 // client "pos fleet"
	idle   int64 // a client without keys
	orders map[string]int64
	keys   map[string]int64 // key row ids by "client/key" (shop's by key alone)
}

func (f *consoleFixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Exec(q, args...); err != nil {
		f.t.Fatalf("fixture: %v\n%s", err, q)
	}
}

func (f *consoleFixture) id(q string, args ...any) int64 {
	f.t.Helper()
	var id int64
	if err := f.db.Get(&id, q, args...); err != nil {
		f.t.Fatalf("fixture: %v\n%s", err, q)
	}
	return id
}

func sha(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// fixtureOrder describes one order of the fixture and the key that made it.
type fixtureOrder struct {
	id       int64 // of the order and of its key; 0: the next of each sequence
	name     string
	client   int64
	key      string // "": no key row
	keyState string // default: from the order's status
	status   string
	amount   int64
	items    string
	cust     string
	email    string
	at       time.Time
	brand    string
	last4    string
}

func (f *consoleFixture) order(o fixtureOrder) {
	f.t.Helper()
	if o.items == "" {
		o.items = itemsLatte
	}
	id := f.id(`
		INSERT INTO orders (id, client_id, status, amount, currency, items, customer_id, customer_email,
		                    captured_amount, created_at, updated_at)
		VALUES (coalesce(nullif($8::bigint, 0), nextval(pg_get_serial_sequence('orders', 'id'))),
		        $1, $2::text, $3::bigint, 'TRY', $4, nullif($5::text, ''), nullif($6::text, ''),
		        CASE WHEN $2::text = 'paid' THEN $3::bigint ELSE 0 END, $7, $7)
		RETURNING id`, o.client, o.status, o.amount, o.items, o.cust, o.email, o.at, o.id)
	f.orders[o.name] = id
	if o.status == "paid" || o.status == "declined" {
		if o.brand == "" {
			o.brand, o.last4 = "visa", "4242"
		}
		payStatus, decline := "succeeded", ""
		if o.status == "declined" {
			payStatus, decline = "declined", "card_declined"
		}
		f.exec(`
			INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status,
			                      decline_code, card_brand, card_last4, created_at)
			VALUES ($1::bigint, 'ch_' || $1::bigint, 'pk_' || $1::bigint, $2, 'TRY', $3, nullif($4::text, ''), $5, $6, $7)`,
			id, o.amount, payStatus, decline, o.brand, o.last4, o.at.Add(time.Second))
	}
	if o.key == "" {
		return
	}
	state := o.keyState
	if state == "" {
		state = checkout.StateCompleted
		if o.status == "pending" {
			state = checkout.StateInProgress
		}
	}
	status := 201
	if o.status == "declined" {
		status = 402
	}
	f.keys[f.keyName(o.client, o.key)] = f.id(`
		INSERT INTO idempotency_keys (id, client_id, key, fingerprint, method, path, state, recovery_point,
		       order_id, response_status, response_headers, response_body, created_at, completed_at, expires_at,
		       attention_reason)
		OVERRIDING SYSTEM VALUE
		VALUES (coalesce(nullif($8::bigint, 0), nextval(pg_get_serial_sequence('idempotency_keys', 'id'))),
		        $1, $2, $3::bytea, 'POST', '/v1/orders', $4::text,
		        CASE WHEN $4::text = 'completed' THEN 'finished' ELSE 'order_created' END,
		        $5::bigint, CASE WHEN $4::text = 'completed' THEN $6::int END,
		        CASE WHEN $4::text = 'completed' THEN '{"Content-Type":"application/json"}'::jsonb END,
		        CASE WHEN $4::text = 'completed' THEN convert_to('{"id":' || $5::bigint || '}', 'UTF8') END,
		        $7::timestamptz, CASE WHEN $4::text = 'completed' THEN $7::timestamptz + interval '1 second' END,
		        $7::timestamptz + interval '24 hours',
		        CASE WHEN $4::text = 'needs_attention' THEN 'provider outcome unknown' END)
		RETURNING id`, o.client, o.key, sha(o.key), state, id, status, o.at, o.id)
}

func (f *consoleFixture) keyName(client int64, key string) string {
	if client == f.shop {
		return key
	}
	return fmt.Sprint(client, "/", key)
}

// event records a key event; key_id is the fixture's key row, or none.
func (f *consoleFixture) event(client int64, key, kind string, at time.Time, extra ...any) {
	f.t.Helper()
	var keyID any
	if id, ok := f.keys[f.keyName(client, key)]; ok {
		keyID = id
	}
	var fingerprint any
	var detail any
	status := 200
	for _, e := range extra {
		switch e := e.(type) {
		case []byte:
			fingerprint = e
		case string:
			detail = e
		case int:
			status = e
		case int64:
			keyID = e
		}
	}
	f.exec(`
		INSERT INTO key_events (at, client_id, key, key_id, kind, status, request_id, remote_addr, user_agent,
		                        fingerprint, detail)
		VALUES ($1, $2, $3, $4, $5, $6, 'req-' || $3 || '-' || $5, '203.0.113.7', 'tekrar-test/1', $7, $8::text::jsonb)`,
		at, client, key, keyID, kind, status, fingerprint, detail)
}

// seedConsole writes the fixture: three clients, orders in every state with their keys,
// payments, refunds, events, tombstones and sweeps, and the orders the double-tap detector
// must and must not pair.
func seedConsole(t *testing.T, d *sqlx.DB) *consoleFixture {
	t.Helper()
	f := &consoleFixture{t: t, db: d, orders: map[string]int64{}, keys: map[string]int64{}}
	client := func(name string) int64 { return checkouttest.ClientRow(t, d, name) }
	f.shop, f.pos, f.idle = client("shop app"), client("pos fleet"), client("idle")
	h := time.Hour
	shop, pos := f.shop, f.pos

	// Eight keys (and orders) arrive at the same instant, at0+6h. These five first, with
	// the highest ids in neither the order of their rows nor the reverse, so that only the
	// id tie-breaker sorts them right whatever the plan reads first; then "dup" at two
	// clients, and "k-tie".
	for i, id := range []int64{900003, 900005, 900001, 900004, 900002} {
		f.order(fixtureOrder{id: id, name: fmt.Sprint("tie-", id), client: shop, key: fmt.Sprint("k-tie-", id), status: "paid",
			amount: 3200 + int64(i), at: at0.Add(6 * h)})
	}

	// Customer A: two paid orders, the first partly refunded.
	f.order(fixtureOrder{name: "a1", client: shop, key: "k-a1", status: "paid", amount: 4500, cust: "cus_A",
		email: "Ayse@Example.com", at: at0})
	f.order(fixtureOrder{name: "a2", client: shop, key: "k-a2", status: "paid", amount: 9000, cust: "cus_A",
		at: at0.Add(2 * h), brand: "mastercard", last4: "5555"})
	refund := f.id(`
		INSERT INTO refunds (order_id, client_id, amount, currency, reason, status, provider_refund_id,
		                     provider_key, created_at, updated_at)
		VALUES ($1, $2, 1000, 'TRY', 'damaged', 'succeeded', 're_1', 'pkr_1', $3, $3) RETURNING id`,
		f.orders["a1"], shop, at0.Add(h))
	f.exec(`UPDATE orders SET refunded_amount = 1000 WHERE id = $1`, f.orders["a1"])
	f.keys["k-r1"] = f.id(`
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point,
		       refund_id, response_status, response_headers, response_body, created_at, expires_at)
		VALUES ($1, 'k-r1', $2::bytea, 'POST', '/v1/orders/1/refunds', 'completed', 'finished', $3, 201, '{}',
		        '\x7b7d', $4, $5) RETURNING id`, shop, sha("k-r1"), refund, at0.Add(h), at0.Add(25*h))
	// A second refund whose key was swept: only its tombstone names it.
	refund2 := f.id(`
		INSERT INTO refunds (order_id, client_id, amount, currency, status, provider_key, created_at, updated_at)
		VALUES ($1, $2, 500, 'TRY', 'pending', 'pkr_2', $3, $3) RETURNING id`,
		f.orders["a1"], shop, at0.Add(90*time.Minute))
	f.exec(`
		INSERT INTO key_tombstones (client_id, key, fingerprint, method, path, refund_id, first_seen,
		                            expired_at, forget_at, created_at)
		VALUES ($1, 'k-r2', $2, 'POST', '/v1/orders/1/refunds', $3, $4::timestamptz, $4::timestamptz,
		        $4::timestamptz + interval '30 days', $4::timestamptz)`,
		shop, sha("k-r2"), refund2, at0.Add(90*time.Minute))

	// Customer B: a declined order and one in progress; customer C: one needing attention.
	f.order(fixtureOrder{name: "b1", client: shop, key: "k-b1", status: "declined", amount: 4500, cust: "cus_B",
		at: at0.Add(3 * h), last4: "0002", brand: "visa"})
	f.order(fixtureOrder{name: "b2", client: shop, key: "k-b2", status: "pending", amount: 1200, cust: "cus_B", at: at0.Add(4 * h)})
	f.order(fixtureOrder{name: "c1", client: shop, key: "k-c1", keyState: checkout.StateNeedsAttention, status: "pending",
		amount: 1300, cust: "cus_C", at: at0.Add(5 * h)})

	// A swept key (tombstone only) and a key being swept (row and tombstone).
	f.order(fixtureOrder{name: "d1", client: shop, status: "paid", amount: 2500, cust: "cus_D", at: at0.Add(-48 * h)})
	f.exec(`
		INSERT INTO key_tombstones (client_id, key, fingerprint, method, path, order_id, first_seen,
		                            expired_at, forget_at, created_at)
		VALUES ($1, 'k-swept', $2, 'POST', '/v1/orders', $3, $4::timestamptz, $4::timestamptz + interval '24 hours',
		        $4::timestamptz + interval '30 days', $4::timestamptz + interval '25 hours')`,
		shop, sha("k-swept"), f.orders["d1"], at0.Add(-48*h))
	f.order(fixtureOrder{name: "e1", client: shop, key: "k-settle", status: "paid", amount: 2600, cust: "cus_E", at: at0.Add(-30 * h)})
	f.exec(`
		INSERT INTO key_tombstones (client_id, key, key_id, fingerprint, method, path, order_id, first_seen,
		                            expired_at, forget_at, created_at)
		VALUES ($1, 'k-settle', $2, $3, 'POST', '/v1/orders', $4, $5::timestamptz, $5::timestamptz + interval '24 hours',
		        $5::timestamptz + interval '30 days', $5::timestamptz + interval '24 hours')`,
		shop, f.keys["k-settle"], sha("k-settle"), f.orders["e1"], at0.Add(-30*h))

	// The same key string at two clients, arriving at the same instant as a shop key.
	f.order(fixtureOrder{name: "dup-shop", client: shop, key: "dup", status: "paid", amount: 3000, cust: "cus_F", at: at0.Add(6 * h)})
	f.order(fixtureOrder{name: "tie-shop", client: shop, key: "k-tie", status: "paid", amount: 3100, cust: "cus_F", at: at0.Add(6 * h)})
	f.order(fixtureOrder{name: "dup-pos", client: pos, key: "dup", status: "paid", amount: 3000, cust: "cus_F", at: at0.Add(6 * h)})

	// 250 keys of the POS fleet a second apart, to page through and to hit the limit cap.
	f.exec(`
		WITH o AS (
		    INSERT INTO orders (client_id, status, amount, currency, items, captured_amount, created_at, updated_at)
		    SELECT $1, 'paid', 777, 'TRY', '[]', 777, $2::timestamptz + i * interval '1 second', $2::timestamptz
		      FROM generate_series(1, 250) i
		    RETURNING id, created_at
		)
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point,
		       order_id, response_status, response_body, created_at, expires_at)
		SELECT $1, 'bulk-' || to_char(extract(epoch FROM o.created_at - $2::timestamptz), 'FM000'),
		       sha256(o.id::text::bytea), 'POST', '/v1/orders', 'completed', 'finished', o.id, 201, '\x7b7d',
		       o.created_at, o.created_at + interval '1 hour'
		  FROM o`, pos, at0.Add(24*h))

	// Double taps. The detector must pair dt1/dt2 (two keys, 30 s apart) and em1/em2 (the
	// same email in another case), and nothing else.
	dt := at0.Add(48 * h)
	s := time.Second
	f.order(fixtureOrder{name: "dt1", client: shop, key: "tap-1", status: "paid", amount: 4500, cust: "cus_DT", at: dt})
	f.order(fixtureOrder{name: "dt2", client: shop, key: "tap-2", status: "paid", amount: 4500, cust: "cus_DT", at: dt.Add(30 * s)})
	f.order(fixtureOrder{name: "dt-pos", client: pos, key: "tap-3", status: "paid", amount: 4500, cust: "cus_DT", at: dt.Add(40 * s)})
	// The same key string made both orders (a key forgotten and used again): not two taps.
	f.order(fixtureOrder{name: "sk1", client: shop, status: "paid", amount: 4500, cust: "cus_SK", at: dt.Add(10 * time.Minute)})
	f.exec(`
		INSERT INTO key_tombstones (client_id, key, fingerprint, method, path, order_id, first_seen,
		                            expired_at, forget_at, created_at)
		VALUES ($1, 'same-key', $2, 'POST', '/v1/orders', $3, $4, $4, $4, $4)`,
		shop, sha("same-key"), f.orders["sk1"], dt.Add(10*time.Minute))
	f.order(fixtureOrder{name: "sk2", client: shop, key: "same-key", status: "paid", amount: 4500, cust: "cus_SK", at: dt.Add(10*time.Minute + 30*s)})
	f.order(fixtureOrder{name: "am1", client: shop, key: "tap-am1", status: "paid", amount: 4500, cust: "cus_AM", at: dt.Add(20 * time.Minute)})
	f.order(fixtureOrder{name: "am2", client: shop, key: "tap-am2", status: "paid", amount: 4600, cust: "cus_AM", at: dt.Add(20*time.Minute + 30*s)})
	f.order(fixtureOrder{name: "w1", client: shop, key: "tap-w1", status: "paid", amount: 4500, cust: "cus_W", at: dt.Add(30 * time.Minute)})
	f.order(fixtureOrder{name: "w2", client: shop, key: "tap-w2", status: "paid", amount: 4500, cust: "cus_W", at: dt.Add(40 * time.Minute)})
	f.order(fixtureOrder{name: "dc1", client: shop, key: "tap-dc1", status: "paid", amount: 4500, cust: "cus_DC", at: dt.Add(50 * time.Minute)})
	f.order(fixtureOrder{name: "dc2", client: shop, key: "tap-dc2", status: "declined", amount: 4500, cust: "cus_DC", at: dt.Add(50*time.Minute + 30*s)})
	f.order(fixtureOrder{name: "x1", client: shop, key: "tap-x", status: "paid", amount: 4500, cust: "cus_X", at: dt.Add(60 * time.Minute)})
	f.order(fixtureOrder{name: "y1", client: shop, key: "tap-y", status: "paid", amount: 4500, cust: "cus_Y", at: dt.Add(60*time.Minute + 30*s)})
	f.order(fixtureOrder{name: "it1", client: shop, key: "tap-it1", status: "paid", amount: 4500, cust: "cus_IT", at: dt.Add(70 * time.Minute)})
	f.order(fixtureOrder{name: "it2", client: shop, key: "tap-it2", status: "paid", amount: 4500, cust: "cus_IT", items: itemsTea, at: dt.Add(70*time.Minute + 30*s)})
	f.order(fixtureOrder{name: "em1", client: shop, key: "tap-em1", status: "paid", amount: 4500, email: "Zed@Example.com", at: dt.Add(80 * time.Minute)})
	f.order(fixtureOrder{name: "em2", client: shop, key: "tap-em2", status: "paid", amount: 4500, email: "zed@example.COM", at: dt.Add(80*time.Minute + 20*s)})
	f.order(fixtureOrder{name: "anon1", client: shop, key: "tap-an1", status: "paid", amount: 4500, at: dt.Add(90 * time.Minute)})
	f.order(fixtureOrder{name: "anon2", client: shop, key: "tap-an2", status: "paid", amount: 4500, at: dt.Add(90*time.Minute + 10*s)})

	// Events. k-a1: created, completed, three replays, a conflict; one replay of an earlier
	// incarnation of the key (another row id) that its replay count must not include.
	m := time.Minute
	f.event(shop, "k-a1", checkout.KindReplayed, at0.Add(-240*h), int64(987654))
	f.event(shop, "k-a1", checkout.KindCreated, at0, 201, `{"order_id":1}`)
	f.event(shop, "k-a1", checkout.KindCompleted, at0, 201)
	f.event(shop, "k-a1", checkout.KindReplayed, at0.Add(1*m), 201)
	f.event(shop, "k-a1", checkout.KindReplayed, at0.Add(2*m), 201)
	f.event(shop, "k-a1", checkout.KindReusedConflict, at0.Add(3*m), 422, sha("other body"), `{"method":"POST","path":"/v1/orders"}`)
	f.event(shop, "k-a1", checkout.KindReplayed, at0.Add(3*m), 201) // the same instant as the conflict
	f.event(shop, "k-a2", checkout.KindCreated, at0.Add(2*h), 201)
	f.event(shop, "k-a2", checkout.KindReplayed, at0.Add(2*h+m), 201)
	f.event(shop, "k-b2", checkout.KindCreated, at0.Add(4*h), 202)
	f.event(shop, "k-b2", checkout.KindInUseRejected, at0.Add(4*h+m), 409)
	f.event(shop, "k-c1", checkout.KindCreated, at0.Add(5*h), 503)
	f.event(shop, "k-swept", checkout.KindExpired, at0.Add(-23*h), 0)
	f.event(shop, "k-swept", checkout.KindLateRetry, at0.Add(-22*h), 422, sha("k-swept"), `{"swept":true}`)
	f.event(pos, "dup", checkout.KindCreated, at0.Add(6*h), 201)
	f.event(pos, "dup", checkout.KindReplayed, at0.Add(6*h+m), 201)
	f.event(pos, "dup", checkout.KindReplayed, at0.Add(6*h+2*m), 201)
	f.event(shop, "dup", checkout.KindReplayed, at0.Add(6*h+2*m), 201)

	// Five replays at one instant, the highest id inserted in the middle: however a plan
	// reads them (in the order of their rows or the reverse), only the id tie-breaker pages
	// through them right.
	for _, id := range []int64{700003, 700001, 700005, 700004, 700002} {
		f.exec(`
			INSERT INTO key_events (id, at, client_id, key, key_id, kind, status)
			OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, 'k-a2', $4, 'replayed', 200)`,
			id, at0.Add(-120*h), shop, f.keys["k-a2"])
	}

	// Sweeps.
	for i := range 3 {
		f.exec(`
			INSERT INTO sweeps (started_at, finished_at, node, keys_tombstoned, keys_deleted,
			                    tombstones_forgotten, events_deleted, batches, error)
			VALUES ($1, $1::timestamptz + interval '2 seconds', 'node-a', $2, $2, 0, 0, 1, nullif($3, ''))`,
			at0.Add(time.Duration(i)*m), i+1, map[bool]string{true: "boom"}[i == 2])
	}
	return f
}
