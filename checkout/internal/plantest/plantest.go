// Package plantest seeds a checkout database at scale and records the queries code runs,
// for the tests that EXPLAIN them: the console's reads (package report) and the key writes
// (package checkout) are planned against the same data.
package plantest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// DB runs queries and remembers them, to EXPLAIN exactly what the console runs.
type DB struct {
	sqlx.QueryerContext
	mu      sync.Mutex
	queries []Query
}

type Query struct {
	Q    string
	Args []any
}

func (r *DB) record(q string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, Query{q, args})
}

func (r *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	r.record(q, args)
	return r.QueryerContext.QueryContext(ctx, q, args...)
}

func (r *DB) QueryxContext(ctx context.Context, q string, args ...any) (*sqlx.Rows, error) {
	r.record(q, args)
	return r.QueryerContext.QueryxContext(ctx, q, args...)
}

func (r *DB) QueryRowxContext(ctx context.Context, q string, args ...any) *sqlx.Row {
	r.record(q, args)
	return r.QueryerContext.QueryRowxContext(ctx, q, args...)
}

func (r *DB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	r.record(q, args)
	return r.QueryerContext.(sqlx.ExecerContext).ExecContext(ctx, q, args...)
}

func (r *DB) Take() []Query {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

// SeqScans walks an EXPLAIN (FORMAT JSON) plan and returns the relations it reads whole.
func SeqScans(plan any) []string {
	var out []string
	switch p := plan.(type) {
	case map[string]any:
		if p["Node Type"] == "Seq Scan" {
			out = append(out, fmt.Sprint(p["Relation Name"]))
		}
		for _, v := range p {
			out = append(out, SeqScans(v)...)
		}
	case []any:
		for _, v := range p {
			out = append(out, SeqScans(v)...)
		}
	}
	return out
}

// Discarded is, per relation, how many rows the nodes of an executed plan (EXPLAIN
// (ANALYZE, FORMAT JSON)) read and then threw away by a filter, times their loops. An index
// scan is no Seq Scan and can still read a whole table: one ordered by another index that
// stops at its LIMIT only after discarding every row before the match, say, once per row of
// an outer loop.
func Discarded(plan any) map[string]float64 {
	out := map[string]float64{}
	var walk func(any)
	walk = func(v any) {
		switch p := v.(type) {
		case map[string]any:
			if rel, ok := p["Relation Name"].(string); ok {
				removed, _ := p["Rows Removed by Filter"].(float64)
				loops, _ := p["Actual Loops"].(float64)
				out[rel] += removed * max(loops, 1)
			}
			for _, c := range p {
				walk(c)
			}
		case []any:
			for _, c := range p {
				walk(c)
			}
		}
	}
	walk(plan)
	return out
}

// End is the newest instant of the plan test's data: keys arrive over the ten days
// before it.
var End = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// Key is the key of order id in Seed's data (keys are zero-padded so that the
// seed appends to the unique index instead of inserting all over it).
func Key(id int) string { return fmt.Sprintf("key-%08d", id) }

// Seed writes n orders with their keys and payments over ten days, refunds of 1% of
// them, swept orders (tombstones only) for 2% more, about 2.1 events per key, and sweeps.
// To take seconds rather than minutes: set-based statements, several at a time on their
// own connections; the secondary indexes dropped during the load and rebuilt from their
// own definitions after it; and, for a superuser, no foreign key checks (the data is
// consistent by construction).
func Seed(t testing.TB, d *sqlx.DB, n int) {
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
	// Scripts run at the same time and several of them read orders whole. Synchronized scans
	// would let a later reader start where an earlier one is and wrap around, so a table
	// filled from orders would be laid out in an order that changes from run to run (refunds
	// came out with an order_id correlation anywhere from 0.83 to 1), and with it the cost
	// of an index scan on it: the planner's choice flipped from one run to the next.
	// Every table is laid out in id order, as the service appends it.
	prelude := "SET LOCAL synchronous_commit = off;\nSET LOCAL synchronize_seqscans = off;\n"
	if super {
		prelude += "SET LOCAL session_replication_role = replica;\n"
	}
	vars := strings.NewReplacer(
		"{n}", fmt.Sprint(n),
		"{customers}", fmt.Sprint(n/5),
		"{end}", End.Format(time.RFC3339),
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
		  FROM orders WHERE refunded_amount > 0
		 ORDER BY id;
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

// ExplainPrepared prepares query as a statement kept prepared is (internal/db's cache of
// named statements, db.Prepared) and returns its plan (EXPLAIN (FORMAT JSON)) for args, one
// a parameter, under plan_cache_mode mode: "force_generic_plan" is the plan Postgres
// settles on for any arguments after a few runs; "force_custom_plan" the one made for
// these. In a transaction rolled back; the statement is not run.
func ExplainPrepared(t testing.TB, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, mode, query string, args ...any) any {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // nothing to keep
	// A prepared statement outlives the transaction: deallocated before its rollback.
	defer tx.ExecContext(ctx, `DEALLOCATE planned`) //nolint:errcheck // the connection may be gone with the test
	for _, s := range []string{`SET LOCAL plan_cache_mode = ` + mode, `PREPARE planned AS ` + query} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// EXPLAIN EXECUTE takes no parameters of its own: the arguments as literals, of the
	// types the statement's parameters were given when it was prepared.
	literals := make([]string, len(args))
	for i, arg := range args {
		literals[i] = literal(arg)
	}
	var raw []byte
	if err := tx.QueryRowContext(ctx, `EXPLAIN (FORMAT JSON) EXECUTE planned(`+strings.Join(literals, ", ")+`)`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plan any
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	return plan
}

// literal writes arg as an SQL literal, as the driver would send it: a time in RFC 3339
// (fmt's form has a zone name Postgres does not read), bytes as their text, nil as NULL.
func literal(arg any) string {
	switch v := arg.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return pq.QuoteLiteral(v.Format(time.RFC3339Nano))
	case []byte:
		return pq.QuoteLiteral(string(v))
	default:
		return pq.QuoteLiteral(fmt.Sprint(v))
	}
}

// WholeIndexes walks an EXPLAIN (FORMAT JSON) plan and returns the indexes it scans
// without a condition: whole (a partial index, every row of its predicate). None of the
// statements tested reads an index in order to stop at a LIMIT, which would be no fault.
func WholeIndexes(plan any) []string {
	var out []string
	switch p := plan.(type) {
	case map[string]any:
		switch p["Node Type"] {
		case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
			if _, ok := p["Index Cond"]; !ok {
				out = append(out, fmt.Sprint(p["Index Name"]))
			}
		}
		for _, v := range p {
			out = append(out, WholeIndexes(v)...)
		}
	case []any:
		for _, v := range p {
			out = append(out, WholeIndexes(v)...)
		}
	}
	return out
}

// PlanNodes is a plan in one line, for the log: its nodes from the top, each with the
// relation and the index it reads.
func PlanNodes(plan any) string {
	var nodes []string
	var walk func(any)
	walk = func(v any) {
		switch p := v.(type) {
		case map[string]any:
			if typ, ok := p["Node Type"].(string); ok {
				n := typ
				if rel, ok := p["Relation Name"].(string); ok {
					n += " on " + rel
				}
				if ix, ok := p["Index Name"].(string); ok {
					n += " using " + ix
				}
				nodes = append(nodes, n)
			}
			walk(p["Plan"])
			walk(p["Plans"])
		case []any:
			for _, c := range p {
				walk(c)
			}
		}
	}
	walk(plan)
	return strings.Join(nodes, " > ")
}
