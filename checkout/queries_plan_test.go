package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
)

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

func (r *recordingDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	r.record(q, args)
	return r.QueryerContext.(sqlx.ExecerContext).ExecContext(ctx, q, args...)
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
func seedScale(t testing.TB, d *sqlx.DB, n int) {
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
	// Buckets that do not start on a minute are counted from the events themselves: the
	// baseline that the per-minute counts are measured against in the same run.
	add("ReplayRate last day, from the events", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		b, err := ReplayRate(ctx, q, end.Add(-day+time.Second), end, 48)
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
	d := dbtest.New(t)
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

// BenchmarkConsoleQueries times every console query on seedScale's data at a scale of
// TEKRAR_CONSOLE_SCALE keys (default planScale). At 10 million keys the data takes some
// 15 GB: point TEST_DATABASE_URL at a Postgres on disk rather than the tests' RAM one.
//
//	TEKRAR_CONSOLE_SCALE=10000000 TEST_DATABASE_URL=postgres://... \
//	  go test -run '^$' -bench ConsoleQueries -benchtime 20x -timeout 3h ./checkout/
func BenchmarkConsoleQueries(b *testing.B) {
	n := planScale
	if v := os.Getenv("TEKRAR_CONSOLE_SCALE"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10_000 {
			b.Fatalf("TEKRAR_CONSOLE_SCALE=%q: want a number of keys of at least 10000", v)
		}
	}
	d := dbtest.New(b)
	start := time.Now()
	seedScale(b, d, n)
	b.Logf("seeded %d keys in %s", n, time.Since(start).Round(time.Second))
	ctx := context.Background()
	for _, c := range consoleCalls() {
		b.Run(strings.ReplaceAll(c.name, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				if rows, err := c.run(ctx, d); err != nil || rows == 0 {
					b.Fatalf("%d rows, %v", rows, err)
				}
			}
		})
	}
}
