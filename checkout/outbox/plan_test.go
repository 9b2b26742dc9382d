package outbox_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tekrar/tekrar/checkout/internal/plantest"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestTheClaimsGenericPlansUseTheirIndexes: the dispatcher's statements are kept prepared
// per connection, so after a few runs Postgres may plan them once for any arguments (a
// generic plan). Planned so, against 50,000 events, neither may read outbox_events whole
// (it holds every event ever written), whether the queue is nearly empty (as it is while
// the dispatch keeps up) or holds a backlog of every event, when outbox_queue may not be
// read whole either; nor in the plans made for the arguments.
func TestTheClaimsGenericPlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	clientID := newClientRow(t, d.DB)
	if _, err := d.ExecContext(ctx, `
		INSERT INTO outbox_events (client_id, type, payload, created_at)
		SELECT $1, 'order.paid', jsonb_build_object('order', 'ord_' || n), now() - n * interval '1 second'
		  FROM generate_series(1, 50000) n`, clientID); err != nil {
		t.Fatal(err)
	}
	var some string
	if err := d.QueryRowContext(ctx, `SELECT event_id FROM outbox_queue LIMIT 1`).Scan(&some); err != nil {
		t.Fatal(err)
	}
	statements := []struct {
		name, sql string
		arg       any
	}{{"OutboxClaim", outbox.ClaimSQL, 100}, {"OutboxClaimOne", outbox.ClaimOneSQL, some}, {"OutboxGet", outbox.GetSQL, some}}
	for _, state := range []struct {
		name    string
		setUp   string
		wholeOK []string // relations a plan may read whole in this state
	}{
		{"a backlog of every event", `ANALYZE outbox_queue`, nil},
		{"a queue of 200", `DELETE FROM outbox_queue WHERE event_id NOT IN (SELECT event_id FROM outbox_queue ORDER BY available_at LIMIT 200)`,
			[]string{"outbox_queue", "outbox_queue_pk", "outbox_queue_available_idx"}},
	} {
		for _, s := range []string{state.setUp, `ANALYZE outbox_events`, `ANALYZE outbox_queue`} {
			if _, err := d.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
			for _, st := range statements {
				plan := plantest.ExplainPrepared(t, d.DB, mode, st.sql, st.arg)
				for _, rel := range append(plantest.SeqScans(plan), plantest.WholeIndexes(plan)...) {
					if !slices.Contains(state.wholeOK, rel) {
						t.Errorf("%s, %s, with %s: reads %s whole: %s", st.name, mode, state.name, rel, plantest.PlanNodes(plan))
					}
				}
			}
		}
	}
}
