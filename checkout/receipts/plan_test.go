package receipts

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/checkout/internal/plantest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestTheReceiptOrdersPlansUseTheirIndexes: ReceiptOrder (loadOrder) is kept prepared per
// connection, so after a few runs Postgres may plan it once for any order (a generic plan),
// as it did the outbox's claim. Planned so, and planned for its argument, it may read none
// of orders, payments and clients whole, nor one of their indexes without a condition:
// against 30,000 orders and their payments over 2,000 clients, for a paid order, a declined
// one (no succeeded payment) and one that does not exist.
func TestTheReceiptOrdersPlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	query := namedQuery(t, "receipts_sql.go", "ReceiptOrder")
	d := dbtest.New(t)
	ctx := context.Background()
	plantest.Seed(t, d, 30_000)
	// Seed's six clients (four with orders), and as many more as a service has, each with
	// an order paid the last day: clients is no longer one page, where reading it whole is
	// the cheapest read, and its orders are not all of its first four clients (with them,
	// the plans merge-joined the order to clients read in id order from the first, which
	// knew from the statistics that it would stop at the fourth).
	for _, s := range []struct {
		sql  string
		args []any
	}{{`
		INSERT INTO clients (id, name, secret_hash) OVERRIDING SYSTEM VALUE
		SELECT c, 'client ' || c, sha256(('secret ' || c)::bytea) FROM generate_series(7, 2000) c`, nil}, {`
		WITH o AS (
		    INSERT INTO orders (client_id, status, amount, currency, items, customer_email, captured_amount,
		                        created_at, updated_at)
		    SELECT c, 'paid', 4500, 'TRY', '[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":4500}]',
		           'someone@example.com', 4500, $1::timestamptz - c * interval '40 seconds', $1::timestamptz - c * interval '40 seconds'
		      FROM generate_series(7, 2000) c
		    RETURNING id, amount, created_at
		)
		INSERT INTO payments (order_id, provider_charge_id, provider_key, amount, currency, status, card_brand,
		                      card_last4, created_at)
		SELECT id, 'ch_new_' || id, 'pk_new_' || id, amount, 'TRY', 'succeeded', 'visa', '4242', created_at FROM o`, []any{plantest.End}},
		{`VACUUM ANALYZE clients`, nil}, {`VACUUM ANALYZE orders`, nil}, {`VACUUM ANALYZE payments`, nil},
	} {
		if _, err := d.ExecContext(ctx, s.sql, s.args...); err != nil {
			t.Fatalf("%s: %v", s.sql, err)
		}
	}
	var busiest, newest, declined string
	var orders, payments int
	if err := d.QueryRowContext(ctx, `
		SELECT (SELECT public_id FROM orders WHERE client_id = 1 AND status = 'paid' ORDER BY id DESC LIMIT 1),
		       (SELECT public_id FROM orders WHERE client_id = 2000),
		       (SELECT public_id FROM orders WHERE status = 'declined' ORDER BY id DESC LIMIT 1),
		       (SELECT count(*) FROM orders), (SELECT count(*) FROM payments)`).Scan(&busiest, &newest, &declined, &orders, &payments); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d orders, %d payments", orders, payments)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		for _, o := range []struct{ name, publicID string }{
			{"a paid order of the busiest client", busiest}, {"the order of the newest client", newest},
			{"a declined order", declined}, {"no such order", "ord_" + strings.Repeat("0", 32)},
		} {
			plan := plantest.ExplainPrepared(t, d.DB, mode, query, o.publicID)
			for _, rel := range plantest.SeqScans(plan) {
				t.Errorf("ReceiptOrder, %s, %s: reads %s whole", mode, o.name, rel)
			}
			for _, ix := range plantest.WholeIndexes(plan) {
				t.Errorf("ReceiptOrder, %s, %s: reads index %s whole", mode, o.name, ix)
			}
			t.Logf("ReceiptOrder, %s, %s: %s", mode, o.name, plantest.PlanNodes(plan))
		}
	}
}

// namedQuery is the text of the statement named name ("-- name: <name>") in the package's
// file, exactly as the code sends it: loadOrder writes its statement in place.
func namedQuery(t *testing.T, file, name string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "-- name: "+name+" ") {
				found = append(found, s)
			}
		}
		return true
	})
	if len(found) != 1 {
		t.Fatalf("%s: %d statements named %s", file, len(found), name)
	}
	return found[0]
}
