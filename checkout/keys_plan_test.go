package checkout

import (
	"context"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/internal/plantest"
	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestKeyWritesUseThePrimaryKey checks that every statement that writes one key by its id
// finds the key through the primary key, in the generic plan a prepared statement settles
// on and in a custom plan, when statistics say that almost every key is completed. Those
// statements also ask for the key's state; an index of the unfinished keys that the state
// condition matches looks cheaper to the planner than the primary key, but it still holds
// an entry for every key that completed since the last vacuum, and the statement would read
// them all at every completion, more with every second between vacuums.
func TestKeyWritesUseThePrimaryKey(t *testing.T) {
	d := dbtest.New(t)
	plantest.Seed(t, d, 20_000)
	// Statistics taken when no key was in progress, as on a busy server (a few keys in
	// flight among millions) or after a quiet night; then four keys are in progress again.
	for _, s := range []string{
		`UPDATE idempotency_keys SET state = 'completed', recovery_point = 'finished', response_status = 409,
		        response_headers = '{}', response_body = '\x7b7d', completed_at = created_at, attention_reason = NULL
		  WHERE state <> 'completed'`,
		`ANALYZE idempotency_keys`,
		`UPDATE idempotency_keys SET state = 'in_progress', recovery_point = 'order_created', response_status = NULL,
		        response_headers = NULL, response_body = NULL, completed_at = NULL
		  WHERE id IN (SELECT k.id FROM idempotency_keys k JOIN orders o ON o.id = k.order_id
		                WHERE o.status = 'pending' ORDER BY k.id LIMIT 4)`,
	} {
		if _, err := d.Exec(s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}

	ctx := context.Background()
	openKey := func(state string) *Key {
		t.Helper()
		var k Key
		// With its order's public id, as the completer and a release read a key (TakeOver,
		// PublicIDs): cancelOrder's answer names the order by it.
		if err := d.Get(&k, `SELECT `+keyed.Columns+`,
			       (SELECT o.public_id FROM orders o WHERE o.id = idempotency_keys.order_id) AS order_public_id
			  FROM idempotency_keys
			 WHERE state = $1 AND order_id IS NOT NULL ORDER BY id LIMIT 1`, state); err != nil {
			t.Fatalf("an %s key: %v", state, err)
		}
		return &k
	}
	now := plantest.End
	rec := &plantest.DB{QueryerContext: d}
	k := openKey(StateInProgress)
	calls := []struct {
		name string
		run  func() error
	}{
		{"extend lease", func() error {
			_, err := keyed.SetStateIfInProgress(ctx, rec, keyed.Extend(k, now.Add(time.Minute)))
			return err
		}},
		{"release", func() error { _, err := keyed.SetStateIfInProgress(ctx, rec, keyed.Release(k, now)); return err }},
		{"take over", func() error {
			nk, err := keyed.TakeOver(ctx, rec, k, now, time.Minute)
			if err == nil {
				k = nk
			}
			return err
		}},
		{"complete order", func() error {
			return completeOrder(ctx, rec, k, Response{Status: 402, Body: []byte(`{}`)}, now, "declined", 1, 0,
				psp.Charge{ID: "ch_plan", Amount: 100, Currency: "TRY", Status: psp.StatusDeclined, DeclineCode: "card_declined"}, "pk_plan")
		}},
		{"complete paid order", func() error {
			pk := openKey(StateInProgress)
			var amount int64
			if err := d.Get(&amount, `SELECT amount FROM orders WHERE id = $1`, pk.OrderID.Int64); err != nil {
				t.Fatalf("the order's amount: %v", err)
			}
			return completeOrder(ctx, rec, pk, Response{Status: 201, Body: []byte(`{}`)}, now, "paid", 1, amount,
				psp.Charge{ID: "ch_plan_paid", Amount: amount, Currency: "TRY", Status: psp.StatusSucceeded}, "pk_plan_paid")
		}},
		{"cancel order", func() error {
			_, err := cancelOrder(ctx, rec, openKey(StateInProgress), now, &owedRefund{chargeKey: "pk_plan", reason: "plan test", watchUntil: now})
			return err
		}},
		{"mark attention", func() error { return markAttention(ctx, rec, openKey(StateInProgress), "plan test") }},
	}
	for _, c := range calls {
		if err := c.run(); err != nil && !errors.Is(err, keyed.ErrFenced) && !errors.Is(err, keyed.ErrNoKey) {
			t.Fatalf("%s: %v", c.name, err)
		}
		queries := rec.Take()
		if len(queries) != 1 {
			t.Fatalf("%s: recorded %d queries, want 1", c.name, len(queries))
		}
		q := queries[0]
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []string{"generic", "custom"} {
				plan := explainAs(t, d, mode, q)
				scans := keyScans(plan)
				if len(scans) == 0 {
					t.Fatalf("%s plan reads no idempotency_keys:\n%s", mode, plan)
				}
				for _, ix := range scans {
					if ix != "idempotency_keys_pkey" {
						t.Errorf("%s plan reads idempotency_keys by %q, want idempotency_keys_pkey\n%s", mode, ix, plan)
					}
				}
			}
		})
	}
	// The completer's work list, by contrast, must come from the index of unfinished keys.
	if _, err := keyed.Abandoned(ctx, rec, now, 100); err != nil {
		t.Fatalf("abandoned keys: %v", err)
	}
	queries := rec.Take()
	if len(queries) != 1 {
		t.Fatalf("abandoned keys: recorded %d queries, want 1", len(queries))
	}
	q := queries[0]
	for _, mode := range []string{"generic", "custom"} {
		plan := explainAs(t, d, mode, q)
		if scans := keyScans(plan); !slices.Equal(scans, []string{"idempotency_keys_unanswered_idx"}) {
			t.Errorf("%s plan of the completer's work list reads idempotency_keys by %q\n%s", mode, scans, plan)
		}
	}
}

// explainAs returns the JSON plan of q as a prepared statement would run it: "generic" is
// the plan with parameters that a prepared statement settles on after its first runs;
// "custom" is planned for q's arguments.
func explainAs(t *testing.T, d *sqlx.DB, mode string, q plantest.Query) string {
	t.Helper()
	ctx := context.Background()
	conn, err := d.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lits := make([]string, len(q.Args))
	for i, a := range q.Args {
		lits[i] = sqlLiteral(t, a)
	}
	setup := []string{
		"SET plan_cache_mode = force_" + mode + "_plan",
		"PREPARE plan_test AS " + q.Q,
	}
	for _, s := range setup {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	defer conn.ExecContext(ctx, "DEALLOCATE plan_test; RESET plan_cache_mode")
	var out string
	if err := conn.GetContext(ctx, &out, "EXPLAIN (FORMAT JSON) EXECUTE plan_test("+strings.Join(lits, ", ")+")"); err != nil {
		t.Fatalf("explain: %v\n%s", err, q.Q)
	}
	return out
}

// sqlLiteral writes a query argument as an untyped SQL literal, which the prepared
// statement's parameter type then reads.
func sqlLiteral(t *testing.T, a any) string {
	t.Helper()
	if v, ok := a.(driver.Valuer); ok {
		var err error
		if a, err = v.Value(); err != nil {
			t.Fatal(err)
		}
	}
	switch p := a.(type) {
	case *string:
		if p == nil {
			return "NULL"
		}
		a = *p
	case *time.Time:
		if p == nil {
			return "NULL"
		}
		a = *p
	}
	switch v := a.(type) {
	case nil:
		return "NULL"
	case string:
		return pq.QuoteLiteral(v)
	case []byte:
		return pq.QuoteLiteral(`\x` + hex.EncodeToString(v))
	case time.Time:
		return pq.QuoteLiteral(v.Format(time.RFC3339Nano))
	case int, int32, int64, bool:
		return pq.QuoteLiteral(fmt.Sprint(v))
	}
	t.Fatalf("no literal for %T", a)
	return ""
}

// keyScans returns the index of every scan of idempotency_keys in a JSON plan, "" for a
// sequential scan.
func keyScans(plan string) []string {
	var root any
	if err := json.Unmarshal([]byte(plan), &root); err != nil {
		return []string{"unreadable plan: " + err.Error()}
	}
	var out []string
	var walk func(n any, underKeys bool)
	walk = func(n any, underKeys bool) {
		switch p := n.(type) {
		case []any:
			for _, c := range p {
				walk(c, underKeys)
			}
		case map[string]any:
			typ, _ := p["Node Type"].(string)
			onKeys := p["Relation Name"] == "idempotency_keys"
			switch {
			case onKeys && typ == "Seq Scan":
				out = append(out, "")
			case onKeys && (typ == "Index Scan" || typ == "Index Only Scan"):
				out = append(out, fmt.Sprint(p["Index Name"]))
			case underKeys && typ == "Bitmap Index Scan":
				out = append(out, fmt.Sprint(p["Index Name"]))
			}
			for _, c := range p {
				walk(c, onKeys && typ == "Bitmap Heap Scan" || underKeys && typ == "BitmapAnd" || underKeys && typ == "BitmapOr")
			}
		}
	}
	walk(root, false)
	return out
}
