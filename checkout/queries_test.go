package checkout

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// consoleDBs returns fresh databases reached both ways the code may be: the way production
// connects (binary parameters, see db.DSN) and lib/pq's default.
func consoleDBs(t *testing.T) map[string]*sqlx.DB {
	t.Helper()
	bin, err := sqlx.Connect("postgres", db.DSN(dbtest.NewURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bin.Close() })
	return map[string]*sqlx.DB{"binary_parameters": bin, "text_parameters": dbtest.New(t)}
}

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
		state = StateCompleted
		if o.status == "pending" {
			state = StateInProgress
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
		        $1, $2, $3, 'POST', '/v1/orders', $4::text,
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
	client := func(name string) int64 {
		return f.id(`INSERT INTO clients (name, secret_hash) VALUES ($1, $2) RETURNING id`, name, sha(name))
	}
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
		VALUES ($1, 'k-r1', $2, 'POST', '/v1/orders/1/refunds', 'completed', 'finished', $3, 201, '{}',
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
	f.order(fixtureOrder{name: "c1", client: shop, key: "k-c1", keyState: StateNeedsAttention, status: "pending",
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
	f.event(shop, "k-a1", EventReplayed, at0.Add(-240*h), int64(987654))
	f.event(shop, "k-a1", EventCreated, at0, 201, `{"order_id":1}`)
	f.event(shop, "k-a1", EventCompleted, at0, 201)
	f.event(shop, "k-a1", EventReplayed, at0.Add(1*m), 201)
	f.event(shop, "k-a1", EventReplayed, at0.Add(2*m), 201)
	f.event(shop, "k-a1", EventReusedConflict, at0.Add(3*m), 422, sha("other body"), `{"method":"POST","path":"/v1/orders"}`)
	f.event(shop, "k-a1", EventReplayed, at0.Add(3*m), 201) // the same instant as the conflict
	f.event(shop, "k-a2", EventCreated, at0.Add(2*h), 201)
	f.event(shop, "k-a2", EventReplayed, at0.Add(2*h+m), 201)
	f.event(shop, "k-b2", EventCreated, at0.Add(4*h), 202)
	f.event(shop, "k-b2", EventInUseRejected, at0.Add(4*h+m), 409)
	f.event(shop, "k-c1", EventCreated, at0.Add(5*h), 503)
	f.event(shop, "k-swept", EventExpired, at0.Add(-23*h), 0)
	f.event(shop, "k-swept", EventLateRetry, at0.Add(-22*h), 422, sha("k-swept"), `{"swept":true}`)
	f.event(pos, "dup", EventCreated, at0.Add(6*h), 201)
	f.event(pos, "dup", EventReplayed, at0.Add(6*h+m), 201)
	f.event(pos, "dup", EventReplayed, at0.Add(6*h+2*m), 201)
	f.event(shop, "dup", EventReplayed, at0.Add(6*h+2*m), 201)

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

// collectPages pages through a list with pages of limit rows, checking the page size and the
// cursor of each page, and returns every row.
func collectPages[T any](t *testing.T, limit int, list func(Page) ([]T, Page, error)) []T {
	t.Helper()
	var all []T
	page := Page{Limit: limit}
	for i := 0; ; i++ {
		rows, nx, err := list(page)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) > limit {
			t.Fatalf("page %d has %d rows, limit %d", i, len(rows), limit)
		}
		all = append(all, rows...)
		if nx.After == "" {
			return all
		}
		if len(rows) != limit {
			t.Fatalf("page %d has %d rows and a next page", i, len(rows))
		}
		if i > 1000 {
			t.Fatal("pagination does not end")
		}
		page = nx
	}
}

// pageSizes are the page sizes to page through n rows with: small pages over a few rows,
// fewer round trips over many.
func pageSizes(n int) []int {
	if n > 60 {
		return []int{7, 50, MaxPageLimit}
	}
	return []int{1, 2, 7}
}

// keyNames names the keys of rows: the shop app's by their key, other clients' as
// "client/key".
func keyNames(rows []KeyRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
		if r.ClientName != "shop app" {
			out[i] = r.ClientName + "/" + r.Key
		}
	}
	return out
}

// oracleKeys lists keys by a plain query: what ListKeys must return, in order.
func oracleKeys(t *testing.T, d *sqlx.DB, where string, args ...any) []int64 {
	t.Helper()
	var rowIDs []int64
	if err := d.Select(&rowIDs, `SELECT id FROM idempotency_keys k WHERE `+where+` ORDER BY created_at DESC, id DESC`, args...); err != nil {
		t.Fatal(err)
	}
	return rowIDs
}

func rowIDs[T any](rows []T, id func(T) int64) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = id(r)
	}
	return out
}

func keyRowID(r KeyRow) int64 { return r.ID }

func TestConsoleQueries(t *testing.T) {
	for mode, d := range consoleDBs(t) {
		t.Run(mode, func(t *testing.T) {
			f := seedConsole(t, d)
			t.Run("ListKeys", func(t *testing.T) { testListKeys(t, f) })
			t.Run("ExpiringKeys", func(t *testing.T) { testExpiringKeys(t, f) })
			t.Run("GetKey", func(t *testing.T) { testGetKey(t, f) })
			t.Run("Events", func(t *testing.T) { testEvents(t, f) })
			t.Run("Overview", func(t *testing.T) { testOverview(t, f) })
			t.Run("FindOrders", func(t *testing.T) { testFindOrders(t, f) })
			t.Run("SuspectedDoubleTaps", func(t *testing.T) { testDoubleTaps(t, f) })
		})
	}
}

func testListKeys(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	list := func(kf KeyFilter) []KeyRow {
		t.Helper()
		rows, nx, err := ListKeys(ctx, f.db, kf, Page{Limit: MaxPageLimit})
		if err != nil {
			t.Fatal(err)
		}
		if nx.After != "" {
			t.Fatalf("ListKeys(%+v): unexpected next page", kf)
		}
		return rows
	}
	h := time.Hour
	tests := []struct {
		name string
		f    KeyFilter
		want []string
	}{
		{"key at every client", KeyFilter{Key: "dup"}, []string{"pos fleet/dup", "dup"}},
		{"key of one client", KeyFilter{ClientID: f.pos, Key: "dup"}, []string{"pos fleet/dup"}},
		{"key of another client", KeyFilter{ClientID: f.idle, Key: "dup"}, []string{}},
		{"customer: orders and the refund key", KeyFilter{CustomerID: "cus_A"}, []string{"k-a2", "k-r1", "k-a1"}},
		{"customer and client", KeyFilter{ClientID: f.shop, CustomerID: "cus_B"}, []string{"k-b2", "k-b1"}},
		{"customer of another client", KeyFilter{ClientID: f.pos, CustomerID: "cus_B"}, []string{}},
		{"order: its key and its refund keys", KeyFilter{OrderID: f.orders["a1"]}, []string{"k-r1", "k-a1"}},
		{"order and customer", KeyFilter{OrderID: f.orders["a1"], CustomerID: "cus_B"}, []string{}},
		{"state", KeyFilter{State: StateNeedsAttention}, []string{"k-c1"}},
		{"state in progress", KeyFilter{State: StateInProgress}, []string{"k-b2"}},
		{"state and client", KeyFilter{ClientID: f.pos, State: StateInProgress}, []string{}},
		{"time range", KeyFilter{ClientID: f.shop, From: at0.Add(h), To: at0.Add(4 * h)}, []string{"k-b1", "k-a2", "k-r1"}},
		{"time range all clients", KeyFilter{From: at0.Add(3 * h), To: at0.Add(6*h + 1)},
			[]string{"k-tie-900005", "k-tie-900004", "k-tie-900003", "k-tie-900002", "k-tie-900001",
				"pos fleet/dup", "k-tie", "dup", "k-c1", "k-b2", "k-b1"}},
		{"everything combined", KeyFilter{ClientID: f.shop, CustomerID: "cus_A", State: StateCompleted,
			From: at0, To: at0.Add(2 * h)}, []string{"k-r1", "k-a1"}},
	}
	for _, tt := range tests {
		got := keyNames(list(tt.f))
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: ListKeys = %v, want %v", tt.name, got, tt.want)
		}
	}

	// The row itself.
	rows := list(KeyFilter{Key: "k-a1"})
	if len(rows) != 1 {
		t.Fatalf("k-a1: %d rows", len(rows))
	}
	r := rows[0]
	if r.ID != f.keys["k-a1"] || r.ClientID != f.shop || r.ClientName != "shop app" || r.State != StateCompleted ||
		r.RecoveryPoint != PointFinished || r.Method != "POST" || r.Path != "/v1/orders" ||
		r.OrderID == nil || *r.OrderID != f.orders["a1"] || r.RefundID != nil || r.ResponseStatus == nil ||
		*r.ResponseStatus != 201 || !r.CreatedAt.Equal(at0) || !r.ExpiresAt.Equal(at0.Add(24*h)) || r.Replays != 3 {
		t.Errorf("k-a1 row = %+v", r)
	}
	rows = list(KeyFilter{Key: "k-r1", ClientID: f.shop})
	if len(rows) != 1 || rows[0].RefundID == nil || rows[0].RefundOrderID == nil || *rows[0].RefundOrderID != f.orders["a1"] ||
		rows[0].OrderID != nil || rows[0].Replays != 0 {
		t.Errorf("k-r1 rows = %+v", rows)
	}
	for _, r := range list(KeyFilter{Key: "dup"}) {
		if want := map[int64]int64{f.shop: 1, f.pos: 2}[r.ClientID]; r.Replays != want {
			t.Errorf("dup of %s: %d replays, want %d", r.ClientName, r.Replays, want)
		}
	}

	// Every row exactly once across pages, in the order of a plain query, whatever the
	// path: all clients (the per-client merge), one client, a state, a time range.
	pages := []struct {
		f     KeyFilter
		where string
		args  []any
	}{
		{KeyFilter{}, "true", nil},
		{KeyFilter{ClientID: f.shop}, "client_id = $1", []any{f.shop}},
		{KeyFilter{ClientID: f.pos, From: at0.Add(24*h + 10*time.Second), To: at0.Add(24*h + 100*time.Second)},
			"client_id = $1 AND created_at >= $2 AND created_at < $3",
			[]any{f.pos, at0.Add(24*h + 10*time.Second), at0.Add(24*h + 100*time.Second)}},
		{KeyFilter{State: StateCompleted}, "state = 'completed'", nil},
	}
	for _, p := range pages {
		want := oracleKeys(t, f.db, p.where, p.args...)
		if len(want) < 10 {
			t.Fatalf("%+v: too few keys to page through", p.f)
		}
		for _, limit := range pageSizes(len(want)) {
			got := rowIDs(collectPages(t, limit, func(pg Page) ([]KeyRow, Page, error) { return ListKeys(ctx, f.db, p.f, pg) }), keyRowID)
			if !slices.Equal(got, want) {
				t.Errorf("ListKeys(%+v) in pages of %d:\n got %v\nwant %v", p.f, limit, got, want)
			}
		}
	}

	// The cap: at most MaxPageLimit rows, whatever is asked; the default otherwise.
	for _, limit := range []int{0, 201, 100000} {
		rows, nx, err := ListKeys(ctx, f.db, KeyFilter{ClientID: f.pos}, Page{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		want := MaxPageLimit
		if limit == 0 {
			want = DefaultPageLimit
		}
		if len(rows) != want || nx.After == "" || nx.Limit != want {
			t.Errorf("limit %d: %d rows, next %+v; want %d rows and a next page", limit, len(rows), nx, want)
		}
	}

	// Bad input.
	for _, bad := range []struct {
		f KeyFilter
		p Page
	}{
		{KeyFilter{State: "done"}, Page{}},
		{KeyFilter{}, Page{After: "nonsense"}},
		{KeyFilter{}, Page{After: "12_x"}},
	} {
		if _, _, err := ListKeys(ctx, f.db, bad.f, bad.p); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("ListKeys(%+v, %+v): err %v, want ErrInvalidQuery", bad.f, bad.p, err)
		}
	}
}

func testExpiringKeys(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h := time.Hour
	// The POS fleet's bulk keys expire an hour after they arrive, a second apart.
	from, to := at0.Add(25*h+5*time.Second), at0.Add(25*h+25*time.Second)
	var want []string
	for i := 5; i < 25; i++ {
		want = append(want, fmt.Sprintf("bulk-%03d", i))
	}
	for _, limit := range []int{3, 20, 200} {
		rows := collectPages(t, limit, func(p Page) ([]KeyRow, Page, error) { return ExpiringKeys(ctx, f.db, from, to, p) })
		got := make([]string, len(rows))
		for i, r := range rows {
			got[i] = r.Key
		}
		if !slices.Equal(got, want) {
			t.Errorf("ExpiringKeys in pages of %d = %v, want %v", limit, got, want)
		}
	}
	// Ties: the eight keys that arrived at at0+6h expire together, soonest first then by id.
	want = []string{"dup", "k-tie", "pos fleet/dup", "k-tie-900001", "k-tie-900002", "k-tie-900003", "k-tie-900004", "k-tie-900005"}
	for _, limit := range []int{1, 2, 3} {
		rows := collectPages(t, limit, func(p Page) ([]KeyRow, Page, error) {
			return ExpiringKeys(ctx, f.db, at0.Add(30*h), at0.Add(30*h+time.Second), p)
		})
		if got := keyNames(rows); !slices.Equal(got, want) {
			t.Errorf("ExpiringKeys at at0+30h in pages of %d = %v, want %v", limit, got, want)
		}
	}
	rows, _, err := ExpiringKeys(ctx, f.db, at0.Add(24*h), at0.Add(24*h+time.Minute), Page{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keyNames(rows); !slices.Equal(got, []string{"k-a1"}) {
		t.Errorf("ExpiringKeys at at0+24h = %v, want [k-a1]", got)
	}
	if _, _, err := ExpiringKeys(ctx, f.db, at0, at0, Page{}); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("empty range: err %v", err)
	}
}

func testGetKey(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	d, err := GetKey(ctx, f.db, f.shop, "k-a1")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != f.keys["k-a1"] || d.State != StateCompleted || d.Replays != 3 || d.Tombstone != nil ||
		d.Fingerprint != hex.EncodeToString(sha("k-a1")) || d.CompletedAt == nil || !d.CompletedAt.Equal(at0.Add(time.Second)) ||
		d.ResponseHeaders["Content-Type"] != "application/json" ||
		string(d.ResponseBody) != fmt.Sprintf(`{"id":%d}`, f.orders["a1"]) {
		t.Errorf("GetKey(k-a1) = %+v", d)
	}
	o := d.Order
	if o == nil || o.ID != f.orders["a1"] || o.Status != "paid" || o.Amount != 4500 || o.RefundedAmount != 1000 ||
		o.CustomerID != "cus_A" || o.CustomerEmail != "Ayse@Example.com" || !slices.Equal(o.Keys, []string{"k-a1"}) ||
		o.Payment == nil || o.Payment.ChargeID != fmt.Sprint("ch_", o.ID) || o.Payment.Status != "succeeded" ||
		o.Payment.CardBrand != "visa" || o.Payment.CardLast4 != "4242" {
		t.Fatalf("GetKey(k-a1).Order = %+v", o)
	}
	var items []Item
	if err := json.Unmarshal(o.Items, &items); err != nil || len(items) != 1 || items[0].SKU != "LATTE" {
		t.Errorf("items %s: %v", o.Items, err)
	}
	if len(d.Refunds) != 2 || d.Refunds[0].Key != "k-r1" || d.Refunds[0].Amount != 1000 || d.Refunds[0].Status != "succeeded" ||
		d.Refunds[0].ProviderRefundID != "re_1" || d.Refunds[0].Reason != "damaged" ||
		d.Refunds[1].Key != "k-r2" || d.Refunds[1].Status != "pending" {
		t.Errorf("GetKey(k-a1).Refunds = %+v", d.Refunds)
	}

	// A refund key leads to the order it refunds.
	d, err = GetKey(ctx, f.db, f.shop, "k-r1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Order == nil || d.Order.ID != f.orders["a1"] || len(d.Refunds) != 2 {
		t.Errorf("GetKey(k-r1) = %+v", d)
	}

	// Swept: the tombstone, in state expired, with its order.
	d, err = GetKey(ctx, f.db, f.shop, "k-swept")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != 0 || d.State != KeyStateExpired || d.Tombstone == nil || d.Tombstone.KeyID != nil ||
		!d.Tombstone.ExpiredAt.Equal(at0.Add(-24*time.Hour)) || !d.CreatedAt.Equal(at0.Add(-48*time.Hour)) ||
		d.Fingerprint != hex.EncodeToString(sha("k-swept")) || d.Order == nil || d.Order.ID != f.orders["d1"] ||
		!slices.Equal(d.Order.Keys, []string{"k-swept"}) {
		t.Errorf("GetKey(k-swept) = %+v", d)
	}
	// Being swept: the row, and its tombstone.
	d, err = GetKey(ctx, f.db, f.shop, "k-settle")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != f.keys["k-settle"] || d.State != StateCompleted || d.Tombstone == nil || d.Tombstone.KeyID == nil ||
		*d.Tombstone.KeyID != d.ID || !slices.Equal(d.Order.Keys, []string{"k-settle"}) {
		t.Errorf("GetKey(k-settle) = %+v", d)
	}
	// Used again after an earlier incarnation's tombstone: that tombstone is not this row's.
	d, err = GetKey(ctx, f.db, f.shop, "same-key")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != f.keys["same-key"] || d.Tombstone != nil || d.Order.ID != f.orders["sk2"] {
		t.Errorf("GetKey(same-key) = %+v", d)
	}
	// Needing attention, no payment yet.
	d, err = GetKey(ctx, f.db, f.shop, "k-c1")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != StateNeedsAttention || d.AttentionReason != "provider outcome unknown" || d.ResponseBody != nil ||
		d.Order == nil || d.Order.Payment != nil || d.Order.Status != "pending" {
		t.Errorf("GetKey(k-c1) = %+v", d)
	}
	for _, k := range []struct {
		client int64
		key    string
	}{{f.shop, "nope"}, {f.pos, "k-a1"}, {f.idle, "dup"}} {
		if _, err := GetKey(ctx, f.db, k.client, k.key); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("GetKey(%d, %s): err %v, want ErrKeyNotFound", k.client, k.key, err)
		}
	}
}

func testEvents(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	m := time.Minute
	tl, err := KeyTimeline(ctx, f.db, f.shop, "k-a1")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range tl {
		kinds = append(kinds, e.Kind)
	}
	want := []string{EventReplayed, EventCreated, EventCompleted, EventReplayed, EventReplayed, EventReusedConflict, EventReplayed}
	if !slices.Equal(kinds, want) {
		t.Fatalf("timeline kinds = %v, want %v", kinds, want)
	}
	c := tl[5]
	if !c.At.Equal(at0.Add(3*m)) || c.ClientID != f.shop || c.Key != "k-a1" || c.KeyID == nil || *c.KeyID != f.keys["k-a1"] ||
		c.Status == nil || *c.Status != 422 || c.RequestID != "req-k-a1-reused_conflict" || c.RemoteAddr != "203.0.113.7" ||
		c.UserAgent != "tekrar-test/1" || c.Fingerprint != hex.EncodeToString(sha("other body")) ||
		string(c.Detail) != `{"path": "/v1/orders", "method": "POST"}` {
		t.Errorf("conflict event = %+v (detail %s)", c, c.Detail)
	}
	if tl[0].KeyID == nil || *tl[0].KeyID != 987654 || tl[2].Detail != nil || tl[2].Fingerprint != "" {
		t.Errorf("timeline = %+v", tl)
	}
	if tl, err := KeyTimeline(ctx, f.db, f.pos, "k-a1"); err != nil || len(tl) != 0 {
		t.Errorf("timeline of another client's key: %v, %v", tl, err)
	}

	// ListEvents against a plain query, in pages.
	type q struct {
		f     EventFilter
		where string
		args  []any
	}
	h := time.Hour
	for _, tt := range []q{
		{EventFilter{}, "true", nil},
		{EventFilter{Kinds: []string{EventReplayed, EventReusedConflict}}, "kind IN ('replayed', 'reused_conflict')", nil},
		{EventFilter{Kinds: []string{EventReplayed}, ClientID: f.shop, From: at0, To: at0.Add(6*h + 2*m)},
			"kind = 'replayed' AND client_id = $1 AND at >= $2 AND at < $3", []any{f.shop, at0, at0.Add(6*h + 2*m)}},
		{EventFilter{ClientID: f.pos}, "client_id = $1", []any{f.pos}},
		{EventFilter{ClientID: f.shop, Key: "k-a1", Kinds: []string{EventReplayed, EventCreated}, From: at0},
			"client_id = $1 AND key = 'k-a1' AND kind IN ('replayed', 'created') AND at >= $2", []any{f.shop, at0}},
		{EventFilter{Kinds: []string{EventLateRetry, EventExpired}, To: at0}, "kind IN ('late_retry', 'expired') AND at < $1", []any{at0}},
		// By key without the client, by order and by customer: the events of the keys
		// ListKeys finds, live or swept.
		{EventFilter{Key: "dup"}, "key = 'dup'", nil},
		{EventFilter{Key: "dup", Kinds: []string{EventReplayed}}, "key = 'dup' AND kind = 'replayed'", nil},
		{EventFilter{OrderID: f.orders["a1"]}, "client_id = $1 AND key IN ('k-a1', 'k-r1', 'k-r2')", []any{f.shop}},
		{EventFilter{OrderID: f.orders["a1"], Kinds: []string{EventReplayed}, From: at0},
			"client_id = $1 AND key = 'k-a1' AND kind = 'replayed' AND at >= $2", []any{f.shop, at0}},
		{EventFilter{CustomerID: "cus_A"}, "client_id = $1 AND key IN ('k-a1', 'k-a2', 'k-r1', 'k-r2')", []any{f.shop}},
		{EventFilter{CustomerID: "cus_D"}, "client_id = $1 AND key = 'k-swept'", []any{f.shop}},
		{EventFilter{ClientID: f.shop, CustomerID: "cus_B", Kinds: []string{EventInUseRejected, EventCreated}},
			"client_id = $1 AND key IN ('k-b1', 'k-b2') AND kind IN ('in_use_rejected', 'created')", []any{f.shop}},
		{EventFilter{CustomerID: "cus_A", Key: "k-a2", To: at0.Add(2*h + m)},
			"client_id = $1 AND key = 'k-a2' AND at < $2", []any{f.shop, at0.Add(2*h + m)}},
	} {
		var want []int64
		if err := f.db.Select(&want, `SELECT id FROM key_events WHERE `+tt.where+` ORDER BY at DESC, id DESC`, tt.args...); err != nil {
			t.Fatal(err)
		}
		if len(want) < 2 {
			t.Fatalf("%+v: too few events (%d) to page through", tt.f, len(want))
		}
		for _, limit := range []int{1, 3, 200} {
			got := rowIDs(collectPages(t, limit, func(p Page) ([]EventRow, Page, error) { return ListEvents(ctx, f.db, tt.f, p) }),
				func(e EventRow) int64 { return e.ID })
			if !slices.Equal(got, want) {
				t.Errorf("ListEvents(%+v) in pages of %d = %v, want %v", tt.f, limit, got, want)
			}
		}
	}
	for _, none := range []EventFilter{
		{Key: "nope"},
		{ClientID: f.pos, CustomerID: "cus_A"},
		{OrderID: f.orders["a1"], CustomerID: "cus_B"},
		{OrderID: f.orders["a1"], Key: "k-a2"},
		{CustomerID: "cus_A", Kinds: []string{EventLateRetry}},
	} {
		if rows, nx, err := ListEvents(ctx, f.db, none, Page{}); err != nil || len(rows) != 0 || nx.After != "" {
			t.Errorf("ListEvents(%+v) = %d rows, %+v, %v; want none", none, len(rows), nx, err)
		}
	}
	for _, bad := range []EventFilter{{Kinds: []string{"replay"}}, {OrderID: 1, Kinds: []string{"conflict"}}} {
		if _, _, err := ListEvents(ctx, f.db, bad, Page{}); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("ListEvents(%+v): err %v, want ErrInvalidQuery", bad, err)
		}
	}

	// What the key stores comes with each event: the conflict of k-a1 shows both
	// fingerprints and the order; the late retry of the swept k-swept reads its tombstone; a
	// refund key names the order it refunds; an event whose key row is gone, with no
	// tombstone, knows nothing more.
	f.event(f.shop, "k-r1", EventReplayed, at0.Add(-1000*h), 201) // outside every other test's window
	defer f.exec(`DELETE FROM key_events WHERE key = 'k-r1'`)
	one := func(ef EventFilter) EventRow {
		t.Helper()
		rows, _, err := ListEvents(ctx, f.db, ef, Page{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("ListEvents(%+v) = %+v, %v; want one row", ef, rows, err)
		}
		return rows[0]
	}
	is := func(p *int64, want int64) bool { return p != nil && *p == want }
	c = one(EventFilter{ClientID: f.shop, Key: "k-a1", Kinds: []string{EventReusedConflict}})
	if c.ClientName != "shop app" || c.KeyFingerprint != hex.EncodeToString(sha("k-a1")) ||
		c.Fingerprint != hex.EncodeToString(sha("other body")) || c.KeyMethod != "POST" || c.KeyPath != "/v1/orders" ||
		!is(c.OrderID, f.orders["a1"]) {
		t.Errorf("conflict of k-a1 = %+v", c)
	}
	late := one(EventFilter{Kinds: []string{EventLateRetry}})
	if late.Key != "k-swept" || late.KeyID != nil || late.KeyFingerprint != hex.EncodeToString(sha("k-swept")) ||
		late.KeyPath != "/v1/orders" || !is(late.OrderID, f.orders["d1"]) {
		t.Errorf("late retry of k-swept = %+v", late)
	}
	if r := one(EventFilter{Key: "k-r1"}); !is(r.OrderID, f.orders["a1"]) || r.KeyPath != "/v1/orders/1/refunds" {
		t.Errorf("event of refund key k-r1 = %+v", r)
	}
	if old := one(EventFilter{ClientID: f.shop, Key: "k-a1", To: at0}); old.KeyFingerprint != "" || old.OrderID != nil || old.ClientName != "shop app" {
		t.Errorf("event of a gone key row = %+v", old)
	}
	if d := one(EventFilter{ClientID: f.pos, Key: "dup", Kinds: []string{EventCreated}}); d.ClientName != "pos fleet" || !is(d.OrderID, f.orders["dup-pos"]) {
		t.Errorf("created of pos fleet/dup = %+v", d)
	}
}

func testOverview(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h, m := time.Hour, time.Minute
	counts, err := EventCounts(ctx, f.db, at0, at0.Add(6*h+2*m), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{EventCreated: 5, EventCompleted: 1, EventReplayed: 5, EventReusedConflict: 1,
		EventInUseRejected: 1, EventResumed: 0, EventExpired: 0, EventLateRetry: 0, CountRequests: 12}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("EventCounts = %v, want %v", counts, want)
	}
	counts, err = EventCounts(ctx, f.db, at0.Add(-30*24*h), at0.Add(30*24*h), f.pos)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]int64{EventCreated: 1, EventCompleted: 0, EventReplayed: 2, EventReusedConflict: 0,
		EventInUseRejected: 0, EventResumed: 0, EventExpired: 0, EventLateRetry: 0, CountRequests: 3}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("EventCounts(pos) = %v, want %v", counts, want)
	}
	counts, err = EventCounts(ctx, f.db, at0.Add(-23*h), at0.Add(-22*h+1), f.shop)
	if err != nil {
		t.Fatal(err)
	}
	if counts[EventExpired] != 1 || counts[EventLateRetry] != 1 || counts[CountRequests] != 1 {
		t.Errorf("EventCounts(sweep window) = %v", counts)
	}

	n, err := NeedsAttention(ctx, f.db)
	if err != nil || n != 1 {
		t.Errorf("NeedsAttention = %d, %v; want 1", n, err)
	}

	// Four two-hour buckets from at0: created at 0, 2h, 4h, 5h, 6h (twice); replays at
	// 1m, 2m, 3m, 2h1m, 6h1m, 6h2m (twice).
	rate, err := ReplayRate(ctx, f.db, at0, at0.Add(8*h), 4)
	if err != nil {
		t.Fatal(err)
	}
	wantRate := []RateBucket{
		{at0, at0.Add(2 * h), 1, 3},
		{at0.Add(2 * h), at0.Add(4 * h), 1, 1},
		{at0.Add(4 * h), at0.Add(6 * h), 2, 0},
		{at0.Add(6 * h), at0.Add(8 * h), 1, 3},
	}
	if fmt.Sprint(rate) != fmt.Sprint(wantRate) {
		t.Errorf("ReplayRate =\n%v, want\n%v", rate, wantRate)
	}
	// Uneven: 3 buckets over 10 minutes (200 s each); the replay at 3m is in the first.
	rate, err = ReplayRate(ctx, f.db, at0, at0.Add(10*m), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rate) != 3 || rate[0].Created != 1 || rate[0].Replayed != 3 || rate[1].Replayed != 0 ||
		!rate[2].End.Equal(at0.Add(10*m)) || !rate[1].Start.Equal(at0.Add(200*time.Second)) {
		t.Errorf("ReplayRate(3 over 10m) = %v", rate)
	}
	if _, err := ReplayRate(ctx, f.db, at0, at0.Add(h), 0); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("0 buckets: %v", err)
	}

	sweeps, err := RecentSweeps(ctx, f.db, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(sweeps) != 2 || sweeps[0].KeysDeleted != 3 || sweeps[0].Error != "boom" || sweeps[1].KeysDeleted != 2 ||
		sweeps[1].Error != "" || !sweeps[1].StartedAt.Equal(at0.Add(m)) || sweeps[1].Node != "node-a" {
		t.Errorf("RecentSweeps = %+v", sweeps)
	}
}

func testFindOrders(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h := time.Hour
	find := func(of OrderFilter) []string {
		t.Helper()
		rows, nx, err := FindOrders(ctx, f.db, of, Page{Limit: MaxPageLimit})
		if err != nil {
			t.Fatal(err)
		}
		if nx.After != "" {
			t.Fatalf("FindOrders(%+v): unexpected next page", of)
		}
		names := make([]string, 0, len(rows))
		for _, r := range rows {
			for name, id := range f.orders {
				if id == r.ID {
					names = append(names, name)
				}
			}
		}
		return names
	}
	dt := at0.Add(48 * h)
	tests := []struct {
		name string
		f    OrderFilter
		want []string
	}{
		{"customer", OrderFilter{CustomerID: "cus_A"}, []string{"a2", "a1"}},
		{"customer of a client", OrderFilter{CustomerID: "cus_DT", ClientID: f.pos}, []string{"dt-pos"}},
		{"customer at every client", OrderFilter{CustomerID: "cus_DT"}, []string{"dt-pos", "dt2", "dt1"}},
		{"email, any case", OrderFilter{CustomerEmail: "ayse@example.COM"}, []string{"a1"}},
		{"email of two orders", OrderFilter{CustomerEmail: "ZED@example.com"}, []string{"em2", "em1"}},
		{"card last4", OrderFilter{CardLast4: "5555"}, []string{"a2"}},
		{"declined card", OrderFilter{CardLast4: "0002", ClientID: f.shop}, []string{"b1"}},
		{"amount", OrderFilter{Amount: 3000}, []string{"dup-pos", "dup-shop"}},
		{"amount and client", OrderFilter{Amount: 3000, ClientID: f.shop}, []string{"dup-shop"}},
		{"amount, card and window", OrderFilter{Amount: 4500, CardLast4: "4242", From: at0.Add(-h), To: dt.Add(30 * time.Second)},
			[]string{"dt1", "a1"}},
		{"window", OrderFilter{From: at0.Add(4 * h), To: at0.Add(6*h + 1)}, []string{"tie-900005", "tie-900004", "tie-900003", "tie-900002", "tie-900001",
			"dup-pos", "tie-shop", "dup-shop", "c1", "b2"}},
		{"window and client", OrderFilter{ClientID: f.shop, From: at0.Add(-48 * h), To: at0.Add(h)}, []string{"a1", "e1", "d1"}},
		{"nothing matches", OrderFilter{CustomerID: "cus_A", Amount: 4600}, []string{}},
	}
	for _, tt := range tests {
		if got := find(tt.f); !slices.Equal(got, tt.want) {
			t.Errorf("%s: FindOrders = %v, want %v", tt.name, got, tt.want)
		}
	}

	rows, _, err := FindOrders(ctx, f.db, OrderFilter{CustomerID: "cus_A", Amount: 4500}, Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("a1: %d rows", len(rows))
	}
	r := rows[0]
	if r.ClientName != "shop app" || r.RefundedAmount != 1000 || r.Currency != "TRY" || !slices.Equal(r.Keys, []string{"k-a1"}) ||
		r.Payment == nil || r.Payment.CardLast4 != "4242" || r.Payment.CardBrand != "visa" ||
		r.Payment.ChargeID != fmt.Sprint("ch_", r.ID) || !r.Payment.CreatedAt.Equal(at0.Add(time.Second)) || !r.CreatedAt.Equal(at0) {
		t.Errorf("a1 = %+v", r)
	}
	// Keys: a swept key's tombstone, and a key string that made two orders.
	rows, _, _ = FindOrders(ctx, f.db, OrderFilter{CustomerID: "cus_SK"}, Page{})
	if len(rows) != 2 || !slices.Equal(rows[0].Keys, []string{"same-key"}) || !slices.Equal(rows[1].Keys, []string{"same-key"}) {
		t.Errorf("cus_SK = %+v", rows)
	}

	// Pages: all orders (the per-client merge), one client's.
	for _, of := range []OrderFilter{{}, {ClientID: f.pos}, {Amount: 4500}} {
		var want []int64
		q := `SELECT id FROM orders WHERE ($1 = 0 OR client_id = $1) AND ($2 = 0 OR amount = $2) ORDER BY created_at DESC, id DESC`
		if err := f.db.Select(&want, q, of.ClientID, of.Amount); err != nil {
			t.Fatal(err)
		}
		for _, limit := range pageSizes(len(want)) {
			got := rowIDs(collectPages(t, limit, func(p Page) ([]OrderRow, Page, error) { return FindOrders(ctx, f.db, of, p) }),
				func(o OrderRow) int64 { return o.ID })
			if !slices.Equal(got, want) {
				t.Errorf("FindOrders(%+v) in pages of %d: %d rows, want %d\n got %v\nwant %v", of, limit, len(got), len(want), got, want)
			}
		}
	}
	if rows, nx, err := FindOrders(ctx, f.db, OrderFilter{}, Page{Limit: 500}); err != nil || len(rows) != MaxPageLimit || nx.After == "" {
		t.Errorf("limit cap: %d rows, next %+v, %v", len(rows), nx, err)
	}
}

func testDoubleTaps(t *testing.T, f *consoleFixture) {
	ctx := context.Background()
	h := time.Hour
	dt := at0.Add(48 * h)
	names := func(taps []DoubleTap) []string {
		var out []string
		for _, p := range taps {
			var a, b string
			for name, id := range f.orders {
				if id == p.First.ID {
					a = name
				}
				if id == p.Second.ID {
					b = name
				}
			}
			out = append(out, a+"+"+b)
		}
		return out
	}
	tests := []struct {
		name   string
		f      OrderFilter
		window time.Duration
		want   []string
	}{
		{"a day", OrderFilter{From: at0.Add(-7 * 24 * h), To: dt.Add(24 * h)}, 2 * time.Minute, []string{"em1+em2", "dt1+dt2"}},
		{"a client", OrderFilter{ClientID: f.shop, From: dt, To: dt.Add(h)}, 2 * time.Minute, []string{"dt1+dt2"}},
		{"another client", OrderFilter{ClientID: f.pos, From: dt, To: dt.Add(h)}, 2 * time.Minute, nil},
		{"a customer, no range", OrderFilter{CustomerID: "cus_DT"}, time.Minute, []string{"dt1+dt2"}},
		{"an email", OrderFilter{CustomerEmail: "zed@example.com"}, time.Minute, []string{"em1+em2"}},
		{"a window too short", OrderFilter{CustomerID: "cus_DT"}, 29 * time.Second, nil},
		{"the first order is outside the range", OrderFilter{From: dt.Add(time.Second), To: dt.Add(time.Minute)}, time.Minute, nil},
		{"a window long enough for w1+w2", OrderFilter{CustomerID: "cus_W"}, 10 * time.Minute, []string{"w1+w2"}},
		{"amount and card", OrderFilter{Amount: 4500, CardLast4: "4242", From: dt, To: dt.Add(2 * h)}, 2 * time.Minute,
			[]string{"em1+em2", "dt1+dt2"}},
	}
	for _, tt := range tests {
		taps, err := SuspectedDoubleTaps(ctx, f.db, tt.f, tt.window)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := names(taps); !slices.Equal(got, tt.want) {
			t.Errorf("%s: SuspectedDoubleTaps = %v, want %v", tt.name, got, tt.want)
		}
	}
	taps, _ := SuspectedDoubleTaps(ctx, f.db, OrderFilter{CustomerID: "cus_DT"}, time.Minute)
	if len(taps) != 1 || taps[0].Gap != 30*time.Second || !slices.Equal(taps[0].First.Keys, []string{"tap-1"}) ||
		!slices.Equal(taps[0].Second.Keys, []string{"tap-2"}) || taps[0].Second.Payment == nil {
		t.Errorf("dt1+dt2 = %+v", taps)
	}
	for _, bad := range []struct {
		f OrderFilter
		w time.Duration
	}{
		{OrderFilter{ClientID: f.shop}, time.Minute},               // neither a range nor a customer
		{OrderFilter{CustomerID: "cus_DT"}, 0},                     // no window
		{OrderFilter{CustomerID: "cus_DT"}, 25 * time.Hour},        // too long
		{OrderFilter{From: at0, ClientID: f.shop}, time.Minute},    // half a range
		{OrderFilter{To: at0, CardLast4: "4242"}, 2 * time.Minute}, // half a range
	} {
		if _, err := SuspectedDoubleTaps(ctx, f.db, bad.f, bad.w); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("SuspectedDoubleTaps(%+v, %s): err %v, want ErrInvalidQuery", bad.f, bad.w, err)
		}
	}
}

// ---------------------------------------------------------------------------------------
// Plans

// recordingDB runs queries and remembers them, to EXPLAIN exactly what the console runs.
type recordingDB struct {
	sqlx.QueryerContext
	mu      sync.Mutex
	queries []recordedQuery
}

type recordedQuery struct {
	q    string
	args []any
}

func (r *recordingDB) record(q string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, recordedQuery{q, args})
}

func (r *recordingDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	r.record(q, args)
	return r.QueryerContext.QueryContext(ctx, q, args...)
}

func (r *recordingDB) QueryxContext(ctx context.Context, q string, args ...any) (*sqlx.Rows, error) {
	r.record(q, args)
	return r.QueryerContext.QueryxContext(ctx, q, args...)
}

func (r *recordingDB) QueryRowxContext(ctx context.Context, q string, args ...any) *sqlx.Row {
	r.record(q, args)
	return r.QueryerContext.QueryRowxContext(ctx, q, args...)
}

func (r *recordingDB) take() []recordedQuery {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

// seqScans walks an EXPLAIN (FORMAT JSON) plan and returns the relations it reads whole.
func seqScans(plan any) []string {
	var out []string
	switch p := plan.(type) {
	case map[string]any:
		if p["Node Type"] == "Seq Scan" {
			out = append(out, fmt.Sprint(p["Relation Name"]))
		}
		for _, v := range p {
			out = append(out, seqScans(v)...)
		}
	case []any:
		for _, v := range p {
			out = append(out, seqScans(v)...)
		}
	}
	return out
}

// planScale is how many keys TestConsolePlans seeds: enough that a full scan costs more
// than an index range in the planner's eyes, few enough to seed in a couple of seconds.
const planScale = 200_000

// planEnd is the newest instant of the plan test's data: keys arrive over the ten days
// before it.
var planEnd = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// scaleKey is the key of order id in seedScale's data (keys are zero-padded so that the
// seed appends to the unique index instead of inserting all over it).
func scaleKey(id int) string { return fmt.Sprintf("key-%08d", id) }

// seedScale writes n orders with their keys and payments over ten days, refunds of 1% of
// them, swept orders (tombstones only) for 2% more, about 2.1 events per key, and sweeps.
// To take seconds rather than minutes: set-based statements, several at a time on their
// own connections; the secondary indexes dropped during the load and rebuilt from their
// own definitions after it; and, for a superuser, no foreign key checks (the data is
// consistent by construction).
func seedScale(t *testing.T, d *sqlx.DB, n int) {
	t.Helper()
	var indexes []struct {
		Name string `db:"name"`
		Def  string `db:"def"`
	}
	err := d.Select(&indexes, `
		SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
		  FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
		 WHERE t.relname IN ('orders', 'payments', 'refunds', 'idempotency_keys', 'key_events', 'key_tombstones')
		   AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`)
	if err != nil || len(indexes) < 10 {
		t.Fatalf("seed: secondary indexes: %v (%d)", err, len(indexes))
	}
	for _, ix := range indexes {
		if _, err := d.Exec(`DROP INDEX ` + ix.Name); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	var super bool
	if err := d.Get(&super, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`); err != nil {
		t.Fatal(err)
	}
	prelude := "SET LOCAL synchronous_commit = off;\n"
	if super {
		prelude += "SET LOCAL session_replication_role = replica;\n"
	}
	vars := strings.NewReplacer(
		"{n}", fmt.Sprint(n),
		"{customers}", fmt.Sprint(n/5),
		"{end}", planEnd.Format(time.RFC3339),
		"{step}", fmt.Sprint(float64(10*24*time.Hour/time.Microsecond)/float64(n)))
	// parallel runs each script in its own transaction (a multi-statement string is one),
	// at most four at a time.
	parallel := func(scripts ...string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(scripts))
		sem := make(chan struct{}, 4)
		for _, sc := range scripts {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				if _, err := d.Exec(prelude + vars.Replace(sc)); err != nil {
					errs <- fmt.Errorf("%w\n%s", err, sc)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("seed: %v", err)
		}
	}
	parallel(`
		INSERT INTO clients (id, name, secret_hash, key_ttl) OVERRIDING SYSTEM VALUE
		SELECT c, 'client ' || c, sha256(('secret ' || c)::bytea),
		       (ARRAY[interval '24 hours', interval '72 hours', interval '30 days'])[1 + c % 3]
		  FROM generate_series(1, 6) c;
		-- Clients 1 to 4 hold 50%, 30%, 10% and 10% of the traffic; 5 and 6 none.
		WITH it AS (
		    SELECT array_agg(('[{"sku":"S' || s || '","name":"Item","quantity":1,"unit_amount":' || 100 * s || '}]')::jsonb
		                     ORDER BY s) AS a
		      FROM generate_series(0, 299) s
		)
		INSERT INTO orders (id, client_id, status, amount, currency, items, customer_id, customer_email,
		                    captured_amount, refunded_amount, created_at, updated_at)
		SELECT i, cl, st, amt, 'TRY', (SELECT a FROM it)[(1 + i % 300)::int],
		       'cus_' || (i * 31) % {customers}, CASE WHEN i % 2 = 0 THEN 'User' || (i * 31) % {customers} || '@Example.com' END,
		       CASE WHEN st = 'paid' THEN amt ELSE 0 END,
		       CASE WHEN st = 'paid' AND i % 100 = 7 AND i <= {n} THEN amt / 2 ELSE 0 END, at, at
		  FROM (SELECT i, (ARRAY[1, 1, 1, 1, 1, 2, 2, 2, 3, 4])[(1 + i % 10)::int] AS cl,
		               CASE WHEN i % 20 = 0 THEN 'declined' WHEN i % 997 = 0 THEN 'pending' ELSE 'paid' END AS st,
		               100 * (1 + (i * 7919) % 1000) AS amt,
		               -- Orders past n were swept: they are older than the ten days.
		               timestamptz '{end}' - ({n} - i) * {step} * interval '1 microsecond'
		                 - CASE WHEN i > {n} THEN interval '20 days' ELSE interval '0' END AS at
		          FROM generate_series(1::bigint, {n} + {n} / 50) i) s;
		SELECT setval(pg_get_serial_sequence('orders', 'id'), (SELECT max(id) FROM orders));
		INSERT INTO sweeps (started_at, finished_at, node, keys_tombstoned, keys_deleted, tombstones_forgotten,
		                    events_deleted, batches)
		SELECT timestamptz '{end}' - i * interval '1 minute', timestamptz '{end}' - i * interval '1 minute' + interval '1 second',
		       'node-' || i % 3, i % 7, i % 5, 0, 0, 1
		  FROM generate_series(5000, 1, -1) i;`)
	parallel(`
		INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status, decline_code,
		                      card_brand, card_last4, created_at)
		SELECT id, 'ch_' || lpad(id::text, 10, '0'), 'pk_' || lpad(id::text, 10, '0'), amount, 'TRY',
		       CASE status WHEN 'paid' THEN 'succeeded' ELSE 'declined' END,
		       CASE WHEN status = 'declined' THEN 'card_declined' END, 'visa', lpad(((id * 13) % 10000)::text, 4, '0'),
		       created_at + interval '1 second'
		  FROM orders WHERE status <> 'pending';`, `
		-- Keys in order id order, as they arrived.
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point, order_id,
		                              response_status, response_headers, response_body, created_at, completed_at, expires_at)
		SELECT o.client_id, 'key-' || lpad(o.id::text, 8, '0'), sha256(o.id::text::bytea), 'POST', '/v1/orders', s.state,
		       CASE WHEN s.state = 'completed' THEN 'finished' ELSE 'order_created' END, o.id,
		       CASE WHEN s.state = 'completed' THEN 201 END, CASE WHEN s.state = 'completed' THEN '{}'::jsonb END,
		       CASE WHEN s.state = 'completed' THEN convert_to('{"id":' || o.id || '}', 'UTF8') END,
		       o.created_at, o.created_at + interval '1 second', o.created_at + c.key_ttl
		  FROM orders o JOIN clients c ON c.id = o.client_id
		 CROSS JOIN LATERAL (SELECT CASE WHEN o.status <> 'pending' THEN 'completed'
		                                 WHEN o.id % 2 = 0 THEN 'in_progress' ELSE 'needs_attention' END AS state) s
		 WHERE o.id <= {n}
		 ORDER BY o.id;`, `
		INSERT INTO refunds (id, order_id, client_id, amount, currency, status, provider_refund_id, provider_key,
		                     created_at, updated_at)
		SELECT id, id, client_id, refunded_amount, 'TRY', 'succeeded', 're_' || lpad(id::text, 10, '0'),
		       'pkr_' || lpad(id::text, 10, '0'), created_at + interval '1 hour', created_at + interval '1 hour'
		  FROM orders WHERE refunded_amount > 0;
		SELECT setval(pg_get_serial_sequence('refunds', 'id'), (SELECT max(id) FROM refunds));
		INSERT INTO key_tombstones (client_id, key, fingerprint, method, path, order_id, first_seen, expired_at,
		                            forget_at, created_at)
		SELECT client_id, 'key-' || lpad(id::text, 8, '0'), sha256(id::text::bytea), 'POST', '/v1/orders', id, created_at,
		       created_at + interval '24 hours', created_at + interval '30 days', created_at + interval '25 hours'
		  FROM orders WHERE id > {n};
		INSERT INTO key_events (at, client_id, key, kind, detail)
		SELECT expired_at + interval '1 hour', client_id, key, 'expired', jsonb_build_object('order_id', order_id)
		  FROM key_tombstones;`)
	parallel(`
		INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point, refund_id,
		                              response_status, response_headers, response_body, created_at, completed_at, expires_at)
		SELECT r.client_id, 'rkey-' || lpad(r.id::text, 8, '0'), sha256(('r' || r.id)::bytea), 'POST',
		       '/v1/orders/' || r.order_id || '/refunds', 'completed', 'finished', r.id, 201, '{}', '\x7b7d',
		       r.created_at, r.created_at, r.created_at + interval '24 hours'
		  FROM refunds r;`)
	// Events: created and completed for every key; replays of 5% of the keys (twice);
	// conflicts, in-use rejections and late retries of 0.5% each. Keys are in time order, so
	// their events nearly are.
	events := `
		INSERT INTO key_events (at, client_id, key, key_id, kind, status, request_id, remote_addr, user_agent)
		SELECT k.created_at + e.after, k.client_id, k.key, k.id, e.kind, 201, 'req-' || k.id || '-' || e.n,
		       CASE WHEN e.n > 2 THEN '203.0.113.' || k.id % 250 END, CASE WHEN e.n > 2 THEN 'tekrar-load/1' END
		  FROM idempotency_keys k
		  JOIN (VALUES (1, 'created', interval '0', 1, 0), (2, 'completed', interval '1 second', 1, 0),
		               (3, 'replayed', interval '20 seconds', 20, 3), (4, 'replayed', interval '40 seconds', 20, 3),
		               (5, 'reused_conflict', interval '50 seconds', 200, 5), (6, 'in_use_rejected', interval '100 ms', 200, 6),
		               (7, 'late_retry', interval '2 days', 200, 7)) e (n, kind, after, every, r)
		    ON coalesce(k.order_id, k.refund_id) % e.every = e.r
		 WHERE e.n IN ({kinds});`
	parallel(strings.Replace(events, "{kinds}", "1", 1), strings.Replace(events, "{kinds}", "2, 3, 4, 5, 6, 7", 1))
	// Rebuild the indexes, and take statistics and the visibility map as autovacuum would.
	rebuild := make([]string, len(indexes))
	for i, ix := range indexes {
		rebuild[i] = ix.Def
	}
	parallel(rebuild...)
	vacuum := func(tables ...string) {
		var wg sync.WaitGroup
		for _, tb := range tables {
			wg.Go(func() {
				if _, err := d.Exec(`VACUUM ANALYZE ` + tb); err != nil {
					t.Errorf("seed: vacuum %s: %v", tb, err)
				}
			})
		}
		wg.Wait()
	}
	vacuum("clients", "orders", "payments", "refunds", "idempotency_keys", "key_events", "key_tombstones", "sweeps")
}

// consoleCall is one console query with representative parameters for seedScale's data.
type consoleCall struct {
	name string
	run  func(ctx context.Context, q sqlx.QueryerContext) (rows int, err error)
}

func pageRows[T any](rows []T, _ Page, err error) (int, error) { return len(rows), err }

// consoleCalls are the console's queries as an operator would run them against seedScale's
// data: last hour, last day, one client, one key, one customer.
func consoleCalls() []consoleCall {
	end := planEnd
	h := time.Hour
	day := 24 * h
	keys := func(f KeyFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(ListKeys(ctx, q, f, Page{}))
		}
	}
	events := func(f EventFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(ListEvents(ctx, q, f, Page{}))
		}
	}
	orders := func(f OrderFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(FindOrders(ctx, q, f, Page{}))
		}
	}
	taps := func(f OrderFilter, w time.Duration) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			t, err := SuspectedDoubleTaps(ctx, q, f, w)
			return len(t) + 1, err // finding none is a fine answer
		}
	}
	var calls []consoleCall
	add := func(name string, run func(context.Context, sqlx.QueryerContext) (int, error)) {
		calls = append(calls, consoleCall{name, run})
	}
	add("ListKeys all clients", keys(KeyFilter{}))
	add("ListKeys one client", keys(KeyFilter{ClientID: 1}))
	add("ListKeys small client, last hour", keys(KeyFilter{ClientID: 4, From: end.Add(-h), To: end}))
	add("ListKeys all clients, last hour", keys(KeyFilter{From: end.Add(-h), To: end}))
	add("ListKeys key", keys(KeyFilter{Key: scaleKey(12347)}))
	add("ListKeys key and client", keys(KeyFilter{ClientID: 2, Key: scaleKey(12345)}))
	add("ListKeys customer", keys(KeyFilter{CustomerID: "cus_1234"}))
	add("ListKeys customer and client", keys(KeyFilter{ClientID: 1, CustomerID: "cus_1234"}))
	add("ListKeys order", keys(KeyFilter{OrderID: 1207}))
	add("ListKeys needs attention", keys(KeyFilter{State: StateNeedsAttention}))
	add("ListKeys in progress of a client", keys(KeyFilter{ClientID: 1, State: StateInProgress}))
	add("ListKeys completed", keys(KeyFilter{State: StateCompleted}))
	add("ListKeys completed of a client, last day", keys(KeyFilter{ClientID: 2, State: StateCompleted, From: end.Add(-day), To: end}))
	add("ListKeys all clients, page 2", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		_, nx, err := ListKeys(ctx, q, KeyFilter{}, Page{})
		if err != nil || nx.After == "" {
			return 0, fmt.Errorf("no second page: %v", err)
		}
		return pageRows(ListKeys(ctx, q, KeyFilter{}, nx))
	})
	add("ListKeys one client, page 2", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		_, nx, err := ListKeys(ctx, q, KeyFilter{ClientID: 1}, Page{})
		if err != nil || nx.After == "" {
			return 0, fmt.Errorf("no second page: %v", err)
		}
		return pageRows(ListKeys(ctx, q, KeyFilter{ClientID: 1}, nx))
	})
	add("ExpiringKeys next hour", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		return pageRows(ExpiringKeys(ctx, q, end, end.Add(h), Page{}))
	})
	add("GetKey", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		d, err := GetKey(ctx, q, 2, scaleKey(1207)) // refunded
		return len(d.Refunds), err
	})
	add("GetKey swept", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		d, err := GetKey(ctx, q, 1, scaleKey(planScale+2))
		return len(d.Order.Keys), err
	})
	add("KeyTimeline", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		tl, err := KeyTimeline(ctx, q, 1, scaleKey(1203)) // replayed
		return len(tl), err
	})
	add("ListEvents conflicts and replays, last day", events(EventFilter{Kinds: []string{EventReplayed, EventReusedConflict},
		From: end.Add(-day), To: end}))
	add("ListEvents all kinds", events(EventFilter{}))
	add("ListEvents conflicts of a client, last day", events(EventFilter{ClientID: 2, Kinds: []string{EventReusedConflict},
		From: end.Add(-day), To: end}))
	add("ListEvents of a client", events(EventFilter{ClientID: 3}))
	add("ListEvents of a key", events(EventFilter{ClientID: 1, Key: scaleKey(1203), Kinds: []string{EventReplayed}}))
	add("ListEvents of a key at every client", events(EventFilter{Key: scaleKey(1203)}))
	add("ListEvents of an order", events(EventFilter{OrderID: 1207})) // refunded
	add("ListEvents of a swept order", events(EventFilter{OrderID: planScale + 2}))
	add("ListEvents of a customer, replays and conflicts", events(EventFilter{CustomerID: "cus_1234",
		Kinds: []string{EventCreated, EventReplayed, EventReusedConflict}}))
	add("ListEvents of a customer of a client, ten days", events(EventFilter{ClientID: 1, CustomerID: "cus_1234",
		From: end.Add(-10 * day), To: end}))
	add("EventCounts last day", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		m, err := EventCounts(ctx, q, end.Add(-day), end, 0)
		return int(m[CountRequests]), err
	})
	add("EventCounts of a client, last hour", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		m, err := EventCounts(ctx, q, end.Add(-h), end, 2)
		return int(m[CountRequests]), err
	})
	add("NeedsAttention", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		n, err := NeedsAttention(ctx, q)
		return int(n), err
	})
	add("ReplayRate last day", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		b, err := ReplayRate(ctx, q, end.Add(-day), end, 48)
		return len(b), err
	})
	add("RecentSweeps", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		s, err := RecentSweeps(ctx, q, 20)
		return len(s), err
	})
	add("FindOrders customer", orders(OrderFilter{CustomerID: "cus_1234"}))
	add("FindOrders email", orders(OrderFilter{CustomerEmail: "user1234@example.com"}))
	add("FindOrders card last4, last day", orders(OrderFilter{CardLast4: "0042", From: end.Add(-day), To: end}))
	add("FindOrders amount, last day", orders(OrderFilter{Amount: 4200, From: end.Add(-day), To: end}))
	add("FindOrders amount and card", orders(OrderFilter{Amount: 5600, CardLast4: "0485"})) // order 12345
	add("FindOrders last hour", orders(OrderFilter{From: end.Add(-h), To: end}))
	add("FindOrders one client", orders(OrderFilter{ClientID: 2}))
	add("FindOrders all", orders(OrderFilter{}))
	add("FindOrders all, page 2", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		_, nx, err := FindOrders(ctx, q, OrderFilter{}, Page{})
		if err != nil || nx.After == "" {
			return 0, fmt.Errorf("no second page: %v", err)
		}
		return pageRows(FindOrders(ctx, q, OrderFilter{}, nx))
	})
	add("ListEvents replays, page 2", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		f := EventFilter{Kinds: []string{EventReplayed}}
		_, nx, err := ListEvents(ctx, q, f, Page{})
		if err != nil || nx.After == "" {
			return 0, fmt.Errorf("no second page: %v", err)
		}
		return pageRows(ListEvents(ctx, q, f, nx))
	})
	add("SuspectedDoubleTaps last hour", taps(OrderFilter{From: end.Add(-h), To: end}, 2*time.Minute))
	add("SuspectedDoubleTaps a client, last day", taps(OrderFilter{ClientID: 3, From: end.Add(-day), To: end}, 2*time.Minute))
	add("SuspectedDoubleTaps a customer", taps(OrderFilter{CustomerID: "cus_1234"}, 10*time.Minute))
	add("SuspectedDoubleTaps an email", taps(OrderFilter{CustomerEmail: "USER1234@example.com"}, 10*time.Minute))
	add("GetOrderDetail with a refund", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		d, err := GetOrderDetail(ctx, q, 1007) // refunded: see seedScale
		return len(d.Keys) + len(d.Refunds) - 1, err
	})
	add("GetOrderDetail swept", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		d, err := GetOrderDetail(ctx, q, planScale+1) // a tombstone only
		return len(d.Keys), err
	})
	add("OrderRefunds and OrderArrivals of a page", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		rows, _, err := FindOrders(ctx, q, OrderFilter{From: end.Add(-day), To: end}, Page{})
		if err != nil {
			return 0, err
		}
		ids := make([]int64, len(rows))
		for i, o := range rows {
			ids[i] = o.ID
		}
		if _, err := OrderRefunds(ctx, q, ids); err != nil {
			return 0, err
		}
		arrivals, err := OrderArrivals(ctx, q, rows)
		return len(arrivals), err
	})
	return calls
}

// TestConsolePlans seeds planScale keys and checks that no console query reads
// idempotency_keys, orders, key_events, payments or refunds whole: at 10 million keys such
// a plan would take seconds and load the checkout database.
func TestConsolePlans(t *testing.T) {
	d, err := sqlx.Connect("postgres", db.DSN(dbtest.NewURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	start := time.Now()
	seedScale(t, d, planScale)
	t.Logf("seeded %d keys in %s", planScale, time.Since(start).Round(time.Millisecond))
	var n struct {
		Keys   int64 `db:"keys"`
		Events int64 `db:"events"`
	}
	if err := d.Get(&n, `SELECT (SELECT count(*) FROM idempotency_keys) AS keys, (SELECT count(*) FROM key_events) AS events`); err != nil {
		t.Fatal(err)
	}
	if n.Keys < planScale || n.Events < 2*planScale {
		t.Fatalf("seeded %d keys and %d events", n.Keys, n.Events)
	}

	big := []string{"idempotency_keys", "orders", "key_events", "payments", "refunds"}
	ctx := context.Background()
	for _, c := range consoleCalls() {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingDB{QueryerContext: d}
			rows, err := c.run(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			if rows == 0 {
				t.Fatal("found nothing: the parameters are not representative")
			}
			queries := rec.take()
			if len(queries) == 0 {
				t.Fatal("no query recorded")
			}
			for _, q := range queries {
				var out string
				if err := d.GetContext(ctx, &out, "EXPLAIN (FORMAT JSON) "+q.q, q.args...); err != nil {
					t.Fatalf("explain: %v\n%s", err, q.q)
				}
				var plan any
				if err := json.Unmarshal([]byte(out), &plan); err != nil {
					t.Fatal(err)
				}
				for _, rel := range seqScans(plan) {
					if slices.Contains(big, rel) {
						t.Errorf("Seq Scan on %s in the plan of\n%s\nargs %v\n%s", rel, q.q, q.args, textPlan(t, d, q))
					}
				}
			}
		})
	}
	t.Logf("plan test took %s", time.Since(start).Round(time.Millisecond))
}

// textPlan is EXPLAIN's text form, to read in a failure message.
func textPlan(t *testing.T, d *sqlx.DB, q recordedQuery) string {
	var lines []string
	if err := d.Select(&lines, "EXPLAIN "+q.q, q.args...); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
