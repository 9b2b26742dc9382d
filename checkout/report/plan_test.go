package report

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/plantest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// planScale is how many keys TestConsolePlans seeds: enough that a full scan costs more
// than an index range in the planner's eyes, few enough to seed in a couple of seconds.
const planScale = 200_000

// maxDiscarded bounds the rows of a big table one console query may read only to throw
// away (5% of planScale's keys): at 10 million keys a plan that discards more reads for
// seconds, though it has no Seq Scan.
const maxDiscarded = planScale / 20

// consoleCall is one console query with representative parameters for plantest.Seed's data.
type consoleCall struct {
	name string
	run  func(ctx context.Context, q sqlx.QueryerContext) (rows int, err error)
}

func pageRows[T any](rows []T, _ Page, err error) (int, error) { return len(rows), err }

// consoleCalls are the console's queries as an operator would run them against plantest.Seed's
// data: last hour, last day, one client, one key, one customer.
func consoleCalls() []consoleCall {
	end := plantest.End
	h := time.Hour
	day := 24 * h
	keys := func(f KeyFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(ListKeys(ctx, q, f, Page{}))
		}
	}
	events := func(f HistoryFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(ListHistory(ctx, q, f, Page{}))
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
	add("ListKeys key", keys(KeyFilter{Key: plantest.Key(12347)}))
	add("ListKeys key and client", keys(KeyFilter{ClientID: 2, Key: plantest.Key(12345)}))
	add("ListKeys customer", keys(KeyFilter{CustomerID: "cus_1234"}))
	add("ListKeys customer and client", keys(KeyFilter{ClientID: 1, CustomerID: "cus_1234"}))
	add("ListKeys order", keys(KeyFilter{OrderID: 1207}))
	add("ListKeys needs attention", keys(KeyFilter{State: checkout.StateNeedsAttention}))
	add("ListKeys in progress of a client", keys(KeyFilter{ClientID: 1, State: checkout.StateInProgress}))
	add("ListKeys completed", keys(KeyFilter{State: checkout.StateCompleted}))
	add("ListKeys completed of a client, last day", keys(KeyFilter{ClientID: 2, State: checkout.StateCompleted, From: end.Add(-day), To: end}))
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
		d, err := GetKey(ctx, q, 2, plantest.Key(1207)) // refunded
		return len(d.Refunds), err
	})
	add("GetKey swept", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		d, err := GetKey(ctx, q, 1, plantest.Key(planScale+2))
		return len(d.Order.Keys), err
	})
	add("KeyTimeline", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		tl, err := KeyTimeline(ctx, q, 1, plantest.Key(1203)) // replayed
		return len(tl), err
	})
	add("ListHistory conflicts and replays, last day", events(HistoryFilter{Kinds: []string{checkout.KindReplayed, checkout.KindReusedConflict},
		From: end.Add(-day), To: end}))
	add("ListHistory all kinds", events(HistoryFilter{}))
	add("ListHistory conflicts of a client, last day", events(HistoryFilter{ClientID: 2, Kinds: []string{checkout.KindReusedConflict},
		From: end.Add(-day), To: end}))
	add("ListHistory of a client", events(HistoryFilter{ClientID: 3}))
	add("ListHistory of a key", events(HistoryFilter{ClientID: 1, Key: plantest.Key(1203), Kinds: []string{checkout.KindReplayed}}))
	add("ListHistory of a key at every client", events(HistoryFilter{Key: plantest.Key(1203)}))
	add("ListHistory of an order", events(HistoryFilter{OrderID: 1207})) // refunded
	add("ListHistory of a swept order", events(HistoryFilter{OrderID: planScale + 2}))
	add("ListHistory of a customer, replays and conflicts", events(HistoryFilter{CustomerID: "cus_1234",
		Kinds: []string{checkout.KindCreated, checkout.KindReplayed, checkout.KindReusedConflict}}))
	add("ListHistory of a customer of a client, ten days", events(HistoryFilter{ClientID: 1, CustomerID: "cus_1234",
		From: end.Add(-10 * day), To: end}))
	add("HistoryCounts last day", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		m, err := HistoryCounts(ctx, q, end.Add(-day), end, 0)
		return int(m[CountRequests]), err
	})
	add("HistoryCounts of a client, last hour", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		m, err := HistoryCounts(ctx, q, end.Add(-h), end, 2)
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
	add("ListHistory replays, page 2", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		f := HistoryFilter{Kinds: []string{checkout.KindReplayed}}
		_, nx, err := ListHistory(ctx, q, f, Page{})
		if err != nil || nx.After == "" {
			return 0, fmt.Errorf("no second page: %v", err)
		}
		return pageRows(ListHistory(ctx, q, f, nx))
	})
	add("SuspectedDoubleTaps last hour", taps(OrderFilter{From: end.Add(-h), To: end}, 2*time.Minute))
	add("SuspectedDoubleTaps a client, last day", taps(OrderFilter{ClientID: 3, From: end.Add(-day), To: end}, 2*time.Minute))
	add("SuspectedDoubleTaps a customer", taps(OrderFilter{CustomerID: "cus_1234"}, 10*time.Minute))
	add("SuspectedDoubleTaps an email", taps(OrderFilter{CustomerEmail: "USER1234@example.com"}, 10*time.Minute))
	add("GetOrderDetail with a refund", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		d, err := GetOrderDetail(ctx, q, 1007) // refunded: see plantest.Seed
		return len(d.Keys) + len(d.Refunds) - 1, err
	})
	add("ChargesOf a double tap's orders", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		c, err := ChargesOf(ctx, q, []int64{1007, 1008, 1009})
		n := 0
		for _, o := range c {
			n += len(o.Charges)
		}
		return n, err
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
	disputes := func(f DisputeFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(ListDisputes(ctx, q, f, Page{}))
		}
	}
	add("ListDisputes open", disputes(DisputeFilter{}))
	add("ListDisputes all of a client", disputes(DisputeFilter{Status: StatusAll, ClientID: 1}))
	add("ListDisputes of an order", disputes(DisputeFilter{Status: StatusAll, OrderID: 3000}))
	compensations := func(f CompensationFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(ListCompensations(ctx, q, f, Page{}))
		}
	}
	add("ListCompensations all", compensations(CompensationFilter{}))
	add("ListCompensations settled of a client", compensations(CompensationFilter{State: checkout.CompensationNoCharge, ClientID: 1}))
	add("OrderPlan with its ledger charges", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		p, err := OrderPlan(ctx, q, 1003) // a plan: see seedCases
		return len(p.Installments), err
	})
	add("OrderEvents with their deliveries", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		es, err := OrderEvents(ctx, q, 1207) // an event and its delivery: see seedCases
		if err == nil && (len(es) != 1 || len(es[0].Deliveries) != 1) {
			return 0, fmt.Errorf("events %+v: want one, with one delivery", es)
		}
		return len(es), err
	})
	outbox := func(f OutboxFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			rows, err := Outbox(ctx, q, f)
			return len(rows), err
		}
	}
	endpoint := func(ctx context.Context, q sqlx.QueryerContext) (string, error) {
		var p string
		err := sqlx.GetContext(ctx, q, &p, `SELECT public_id FROM webhook_endpoints WHERE client_id = 1`)
		return p, err
	}
	add("EndpointDeliveries", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		p, err := endpoint(ctx, q)
		if err != nil {
			return 0, err
		}
		return pageRows(EndpointDeliveries(ctx, q, p, Page{}))
	})
	add("EndpointDeliveries, page 2", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		p, err := endpoint(ctx, q)
		if err != nil {
			return 0, err
		}
		_, nx, err := EndpointDeliveries(ctx, q, p, Page{Limit: MaxPageLimit})
		if err != nil || nx.After == "" {
			return 0, fmt.Errorf("no second page: %v", err)
		}
		return pageRows(EndpointDeliveries(ctx, q, p, nx))
	})
	add("Outbox all", outbox(OutboxFilter{}))
	add("Outbox of a client", outbox(OutboxFilter{ClientID: 4}))
	add("Outbox of a type", outbox(OutboxFilter{Type: "order.paid"}))
	add("Outbox of an order", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		var p string
		if err := sqlx.GetContext(ctx, q, &p, `SELECT public_id FROM orders WHERE id = 1207`); err != nil {
			return 0, err
		}
		return outbox(OutboxFilter{Order: p})(ctx, q)
	})
	add("Inbox", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		rows, _, err := Inbox(ctx, q, "")
		return len(rows), err
	})
	publicID := func(ctx context.Context, q sqlx.QueryerContext, id int64) (string, error) {
		var p string
		err := sqlx.GetContext(ctx, q, &p, `SELECT public_id FROM orders WHERE id = $1`, id)
		return p, err
	}
	search := func(query string) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			gs, err := Search(ctx, q, query)
			n := 0
			for _, g := range gs {
				n += len(g.Hits)
			}
			return n, err
		}
	}
	add("Search order id", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		p, err := publicID(ctx, q, 1207)
		if err != nil {
			return 0, err
		}
		return search(p)(ctx, q)
	})
	add("Search key (and every untyped kind)", search(plantest.Key(12347)))
	add("Search charge", search("ch_0000012347"))
	add("Search provider refund", search("re_0000001207"))
	add("Search provider event", search("evt_2002"))
	add("Search e-mail prefix", search("user12"))
	add("Search customer id prefix", search("CUS_123"))
	add("Search card", search("0013"))
	add("Search amount", search("49.00"))
	add("Search amount and currency", search("49.00 TRY"))
	add("SearchInbox event", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		rows, err := SearchInbox(ctx, q, "evt_2002")
		return len(rows), err
	})
	add("SearchInbox type", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		rows, err := SearchInbox(ctx, q, "charge.succeeded")
		return len(rows), err
	})
	add("SearchInbox order", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		p, err := publicID(ctx, q, 2002)
		if err != nil {
			return 0, err
		}
		rows, err := SearchInbox(ctx, q, p)
		return len(rows), err
	})
	inboxEvents := func(f InboxFilter) func(context.Context, sqlx.QueryerContext) (int, error) {
		return func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
			return pageRows(InboxEvents(ctx, q, f, Page{Limit: MaxPageLimit}))
		}
	}
	add("InboxEvents all (the inbox export)", inboxEvents(InboxFilter{}))
	add("InboxEvents of a type", inboxEvents(InboxFilter{Query: "charge.succeeded"}))
	add("InboxEvents of an event", inboxEvents(InboxFilter{Query: "evt_2002"}))
	add("InboxEvents of an order", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		p, err := publicID(ctx, q, 2002)
		if err != nil {
			return 0, err
		}
		return inboxEvents(InboxFilter{Query: p})(ctx, q)
	})
	add("OversoldSales", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		rows, err := OversoldSales(ctx, q, 0)
		return len(rows), err
	})
	add("OversoldSales of a register", func(ctx context.Context, q sqlx.QueryerContext) (int, error) {
		rows, err := OversoldSales(ctx, q, 1)
		return len(rows), err
	})
	return calls
}

// TestConsolePlans seeds planScale keys and checks that no console query reads
// idempotency_keys, orders, key_events, payments or refunds whole: at 10 million keys such
// a plan would take seconds and load the checkout database.
func TestConsolePlans(t *testing.T) {
	d := dbtest.New(t)
	start := time.Now()
	plantest.Seed(t, d, planScale)
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

	seedCases(t, d)

	big := []string{"idempotency_keys", "orders", "key_events", "payments", "refunds",
		"outbox_events", "webhook_deliveries", "webhook_attempts", "river_job"}
	ctx := context.Background()
	for _, c := range consoleCalls() {
		t.Run(c.name, func(t *testing.T) {
			rec := &plantest.DB{QueryerContext: d}
			rows, err := c.run(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			if rows == 0 {
				t.Fatal("found nothing: the parameters are not representative")
			}
			queries := rec.Take()
			if len(queries) == 0 {
				t.Fatal("no query recorded")
			}
			for _, q := range queries {
				var out string
				if err := d.GetContext(ctx, &out, "EXPLAIN (FORMAT JSON) "+q.Q, q.Args...); err != nil {
					t.Fatalf("explain: %v\n%s", err, q.Q)
				}
				var plan any
				if err := json.Unmarshal([]byte(out), &plan); err != nil {
					t.Fatal(err)
				}
				for _, rel := range plantest.SeqScans(plan) {
					if slices.Contains(big, rel) {
						t.Errorf("Seq Scan on %s in the plan of\n%s\nargs %v\n%s", rel, q.Q, q.Args, textPlan(t, d, q))
					}
				}
				if err := d.GetContext(ctx, &out, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.Q, q.Args...); err != nil {
					t.Fatalf("explain analyze: %v\n%s", err, q.Q)
				}
				if err := json.Unmarshal([]byte(out), &plan); err != nil {
					t.Fatal(err)
				}
				for rel, n := range plantest.Discarded(plan) {
					if slices.Contains(big, rel) && n > maxDiscarded {
						t.Errorf("%.0f rows of %s read and thrown away by the plan of\n%s\nargs %v\n%s", n, rel, q.Q, q.Args, textPlan(t, d, q))
					}
				}
			}
		})
	}
	t.Logf("plan test took %s", time.Since(start).Round(time.Millisecond))
}

// seedCases adds to plantest.Seed's data the disputes, compensations and provider events the
// console lists: rare beside orders, a few for one order in a thousand, so that their lists
// must not read the orders or payments they join.
func seedCases(t testing.TB, d *sqlx.DB) {
	t.Helper()
	for _, q := range []string{`
		INSERT INTO order_disputes (order_id, provider, dispute_id, amount, reason, status, opened_at, closed_at)
		SELECT id, 'psp', 'dp_' || id, amount, 'fraudulent', (ARRAY['open', 'won', 'lost'])[id % 3 + 1], created_at,
		       CASE WHEN id % 3 <> 0 THEN created_at + interval '1 day' END
		  FROM orders WHERE id % 1000 = 0`, `
		INSERT INTO compensations (client_id, order_id, charge_key, reason, state, next_attempt_at, watch_until, created_at, settled_at)
		SELECT client_id, id, 'pk-' || id, 'gave up', CASE WHEN id % 2 = 0 THEN 'watching' ELSE 'no_charge' END,
		       created_at, created_at + interval '1 day', created_at, CASE WHEN id % 2 = 1 THEN created_at + interval '1 day' END
		  FROM orders WHERE id % 1000 = 1`, `
		INSERT INTO provider_events (provider, event_id, type, charge_id, sequence, body, outcome, received_at, deliveries, last_delivery_at)
		SELECT 'psp', 'evt_' || order_id, 'charge.succeeded', provider_charge_id, 1, '{}', 'applied', created_at, 1, created_at
		  FROM payments WHERE order_id % 1000 = 2`, `
		INSERT INTO registers (id, client_id, public_id, name, created_at, updated_at) OVERRIDING SYSTEM VALUE
		SELECT c, c, 'till-' || c, 'Till ' || c, now(), now() FROM generate_series(1, 4) c`, `
		INSERT INTO pos_sales (order_id, register_id, sold_at, received_at, oversold_units)
		SELECT id, client_id, created_at, created_at, CASE WHEN id % 10000 = 3 THEN 1 ELSE 0 END
		  FROM orders WHERE id % 100 = 3`, `
		INSERT INTO installments (order_id, n, amount, due_on, due_at, status, attempts, updated_at)
		SELECT id, 2, amount, CAST(created_at AS date) + 30, created_at + interval '30 days', 'attention', 2, created_at
		  FROM orders WHERE id % 1000 = 3`, `
		INSERT INTO webhook_endpoints (client_id, url, event_types, created_at)
		SELECT id, 'https://hooks.example.com/' || id, ARRAY['order.paid'], now() FROM clients`, `
		INSERT INTO outbox_events (client_id, type, order_id, payload, created_at)
		SELECT client_id, 'order.paid', id, jsonb_build_object('order_id', public_id, 'sequence', 1), created_at
		  FROM orders`, `
		INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, state, attempts, created_at,
		                                last_attempt_at, last_status, finished_at)
		SELECT e.id, e.type, w.id, '{}', CASE WHEN e.order_id % 10 = 0 THEN 'pending' ELSE 'succeeded' END, 1, e.created_at,
		       e.created_at, CASE WHEN e.order_id % 10 = 0 THEN 500 ELSE 200 END,
		       CASE WHEN e.order_id % 10 <> 0 THEN e.created_at END
		  FROM outbox_events e JOIN webhook_endpoints w ON w.client_id = e.client_id`, `
		INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, latency_ms, response_excerpt)
		SELECT id, created_at, last_status, 20, 'ok' FROM webhook_deliveries`,
		`ANALYZE webhook_endpoints`, `ANALYZE outbox_events`, `ANALYZE webhook_deliveries`, `ANALYZE webhook_attempts`, `ANALYZE river_job`,
		`ANALYZE registers`, `ANALYZE pos_sales`, `ANALYZE order_disputes`, `ANALYZE compensations`, `ANALYZE provider_events`, `ANALYZE installments`} {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
}

// textPlan is EXPLAIN's text form, to read in a failure message.
func textPlan(t *testing.T, d *sqlx.DB, q plantest.Query) string {
	var lines []string
	if err := d.Select(&lines, "EXPLAIN "+q.Q, q.Args...); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// BenchmarkConsoleQueries times every console query on plantest.Seed's data at a scale of
// TEKRAR_CONSOLE_SCALE keys (default planScale). At 10 million keys the data takes some
// 15 GB: point TEST_DATABASE_URL at a Postgres on disk rather than the tests' RAM one.
//
//	TEKRAR_CONSOLE_SCALE=10000000 TEST_DATABASE_URL=postgres://... \
//	  go test -run '^$' -bench ConsoleQueries -benchtime 20x -timeout 3h ./checkout/report/
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
	plantest.Seed(b, d, n)
	seedCases(b, d)
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
