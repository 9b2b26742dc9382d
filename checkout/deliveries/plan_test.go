package deliveries_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/checkout/internal/plantest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestTheFanOutsGenericPlansUseTheirIndexes: the fan-out's statements (FanOut and
// FanOutBacklog) are kept prepared per connection, so after a few runs Postgres may plan
// them once for any arguments (a generic plan), as it did the outbox's claim. Planned so,
// and planned for their arguments, neither may read webhook_endpoints whole (a handful of
// endpoints for each of thousands of clients) nor webhook_deliveries (every delivery ever
// made, nearly all of them finished), nor one of their indexes without a condition: the
// partial index of the deliveries never attempted holds every client's backlog, and a
// plan that reads it whole makes each fan-out of every client pay for one client's burst.
// Not for the busiest client, whose deliveries are a third of the table, nor for a quiet
// one; whether every delivery is nearly finished or one client has a burst queued.
func TestTheFanOutsGenericPlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := plantest.End
	// 2,000 clients with 2 to 5 endpoints each, some disabled or deleted; 40,000 events over
	// ten days, one every 30 seconds, from six clients (the first sends 40% of them), each
	// fanned out to its client's endpoints subscribed to its type: some 90,000 deliveries.
	// Nearly all are finished (succeeded, or dead: on a disabled endpoint, or one in
	// fifty); one in ten of the last day's is being retried; only the last hour's, and one
	// in a thousand older ones whose job was lost, were never attempted.
	for _, s := range []struct {
		sql  string
		args []any
	}{{`
		INSERT INTO clients (name, secret_hash)
		SELECT 'client ' || c, sha256(('secret ' || c)::bytea) FROM generate_series(1, 2000) c`, nil}, {`
		INSERT INTO webhook_endpoints (client_id, url, event_types, created_at, disabled_at, disabled_reason, deleted_at)
		SELECT c.id, 'https://hooks' || k || '.example/' || c.id,
		       CASE k % 3 WHEN 0 THEN '{order.paid}'::text[] WHEN 1 THEN '{order.paid,order.refunded}'
		                  ELSE '{order.refunded,order.disputed}' END,
		       $1::timestamptz - interval '90 days' + k * interval '1 day',
		       CASE WHEN (c.id + k) % 13 = 0 THEN $1::timestamptz - interval '30 days' END,
		       CASE WHEN (c.id + k) % 13 = 0 THEN 'every delivery failed for 3 days' END,
		       CASE WHEN (c.id + k) % 17 = 0 THEN $1::timestamptz - interval '20 days' END
		  FROM clients c CROSS JOIN LATERAL generate_series(1, 2 + c.id % 4) k`, []any{now}}, {`
		INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, state, attempts, created_at,
		                                next_attempt_at, last_attempt_at, last_status, finished_at)
		SELECT 'evt_' || lpad(to_hex(ev.i), 32, '0'), ev.type, e.id, '{"order":"ord_' || ev.i || '"}', s.state,
		       s.attempts, ev.at,
		       CASE s.state WHEN 'pending' THEN ev.at + s.attempts * interval '10 minutes' END,
		       CASE WHEN s.attempts > 0 THEN ev.at + interval '1 second' END,
		       CASE WHEN s.state = 'succeeded' THEN 200 WHEN s.state = 'dead' THEN 503 WHEN s.attempts > 0 THEN 500 END,
		       CASE s.state WHEN 'succeeded' THEN ev.at + interval '1 second' WHEN 'dead' THEN ev.at + interval '3 days' END
		  FROM (SELECT i, (SELECT min(id) FROM clients) + (ARRAY[0, 0, 0, 0, 1, 1, 2, 3, 4, 5])[1 + i % 10] AS client_id,
		               CASE WHEN i % 5 = 0 THEN 'order.refunded' ELSE 'order.paid' END AS type,
		               $1::timestamptz - (40000 - i) * interval '30 seconds' AS at
		          FROM generate_series(1, 40000) i) ev
		  JOIN webhook_endpoints e ON e.client_id = ev.client_id AND e.deleted_at IS NULL AND ev.type = ANY (e.event_types)
		 CROSS JOIN LATERAL (
		       SELECT CASE WHEN ev.i > 40000 - 120 OR ev.i % 1000 = 0 THEN 'pending'
		                   WHEN ev.i > 40000 - 2880 AND ev.i % 10 = 3 THEN 'pending'
		                   WHEN e.disabled_at IS NOT NULL OR ev.i % 50 = 7 THEN 'dead'
		                   ELSE 'succeeded' END AS state,
		              CASE WHEN ev.i > 40000 - 120 OR ev.i % 1000 = 0 THEN 0
		                   WHEN ev.i > 40000 - 2880 AND ev.i % 10 = 3 THEN 1 + ev.i % 5
		                   WHEN e.disabled_at IS NOT NULL OR ev.i % 50 = 7 THEN 12
		                   ELSE 1 END AS attempts) s`, []any{now}},
		{`VACUUM ANALYZE clients`, nil}, {`VACUUM ANALYZE webhook_endpoints`, nil}, {`VACUUM ANALYZE webhook_deliveries`, nil},
	} {
		if _, err := d.ExecContext(ctx, s.sql, s.args...); err != nil {
			t.Fatalf("%s: %v", s.sql, err)
		}
	}
	var busy, quiet int64
	var total, endpoints, unattempted, busiest int
	if err := d.QueryRowContext(ctx, `
		SELECT min(id), max(id), (SELECT count(*) FROM webhook_endpoints), (SELECT count(*) FROM webhook_deliveries),
		       (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending' AND attempts = 0),
		       (SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
		         WHERE e.client_id = (SELECT min(id) FROM clients))
		  FROM clients`).Scan(&busy, &quiet, &endpoints, &total, &unattempted, &busiest); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d endpoints; %d deliveries, %d of the busiest client, %d never attempted", endpoints, total, busiest, unattempted)
	if total < 50_000 || busiest < total/4 || unattempted > total/50 {
		t.Fatal("the seed is not what the test needs")
	}
	event := func(client int64) []any {
		return []any{fmt.Sprintf("evt_%032x", 1<<40), "order.paid", client, `{"order":"ord_new"}`, now}
	}
	since := now.Add(-deliveries.BacklogFor)
	statements := []struct {
		name, sql string
		args      []any
	}{
		{"FanOut, the busiest client", deliveries.FanOutSQL, event(busy)},
		{"FanOut, a quiet client", deliveries.FanOutSQL, event(quiet)},
		{"FanOutBacklog, the busiest client", deliveries.BacklogSQL, []any{busy, since}},
		{"FanOutBacklog, a quiet client", deliveries.BacklogSQL, []any{quiet, since}},
	}
	// The burst: the second client's 4,000 events of the last ten minutes, to its three
	// endpoints, never attempted yet. The statistics are taken again after it, as
	// autovacuum would (until they are, the plans are those made without the burst).
	burst := `
		INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, created_at, next_attempt_at)
		SELECT 'evt_' || lpad(to_hex(1000000 + i), 32, '0'), 'order.paid', e.id, '{"order":"ord_burst"}',
		       $1::timestamptz - (4000 - i) * interval '150 ms', $1::timestamptz - (4000 - i) * interval '150 ms'
		  FROM generate_series(1, 4000) i
		  JOIN webhook_endpoints e ON e.client_id = (SELECT min(id) + 1 FROM clients) AND e.deleted_at IS NULL
		   AND e.disabled_at IS NULL AND 'order.paid' = ANY (e.event_types)`
	for _, state := range []struct{ name, setUp string }{
		{"nearly every delivery finished", ""},
		{"a client's burst", burst},
	} {
		if state.setUp != "" {
			if _, err := d.ExecContext(ctx, state.setUp, now); err != nil {
				t.Fatal(err)
			}
			if _, err := d.ExecContext(ctx, `ANALYZE webhook_deliveries`); err != nil {
				t.Fatal(err)
			}
		}
		for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
			for _, st := range statements {
				plan := plantest.ExplainPrepared(t, d.DB, mode, st.sql, st.args...)
				for _, rel := range plantest.SeqScans(plan) {
					t.Errorf("%s, %s, with %s: reads %s whole", st.name, mode, state.name, rel)
				}
				for _, ix := range plantest.WholeIndexes(plan) {
					t.Errorf("%s, %s, with %s: reads index %s whole", st.name, mode, state.name, ix)
				}
				t.Logf("%s, %s, with %s: %s", st.name, mode, state.name, plantest.PlanNodes(plan))
			}
		}
	}
}
