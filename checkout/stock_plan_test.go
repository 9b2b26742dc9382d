package checkout

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/tekrar/tekrar/checkout/internal/plantest"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestStockClaimUsesTheProductKey checks that the claim finds each product of a stocked
// order through products_client_sku_uq in the generic plan a prepared statement settles on,
// with a catalogue of 20,000 products, each by its client and sku: reading all the client's
// products at every sale would make every first arrival slower with every product. (With
// the lines as a JSON recordset, which the planner estimates at 100 rows, it did.)
func TestStockClaimUsesTheProductKey(t *testing.T) {
	d := dbtest.New(t)
	plantest.Seed(t, d, 1000)
	for _, s := range []string{
		`INSERT INTO products (client_id, sku, name, price, currency, stock, created_at, updated_at)
		 SELECT 1 + n % 6, 'SKU-' || n, 'Product ' || n, 100, 'TRY', 1000, now(), now() FROM generate_series(1, 20000) n`,
		`ANALYZE products`,
	} {
		if _, err := d.Exec(s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
	ctx := context.Background()
	conn, err := d.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `PREPARE claim AS `+claimOrderSQL.text); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	now := time.Now()
	p := orderClaim{keyClaim: keyClaim{ClientID: 1, Key: "plan", Fingerprint: make([]byte, 32), Method: "POST", Path: "/v1/orders",
		LeaseExpiresAt: sql.NullTime{Time: now, Valid: true}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		Amount: 100, Currency: "TRY", Items: `[]`}
	stockParams(&p, []stockLine{{SKU: "SKU-6", Quantity: 1, UnitAmount: 100}, {SKU: "SKU-12", Quantity: 2, UnitAmount: 100}})
	args := claimOrderSQL.args(&p)
	// EXECUTE takes its parameters as literals.
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			lits[i] = strconv.FormatInt(v, 10)
		case string:
			lits[i] = pq.QuoteLiteral(v)
		case []byte:
			lits[i] = `'\x` + hex.EncodeToString(v) + `'`
		case time.Time:
			lits[i] = pq.QuoteLiteral(v.Format(time.RFC3339Nano))
		case sql.NullTime:
			lits[i] = pq.QuoteLiteral(v.Time.Format(time.RFC3339Nano))
		case pq.StringArray, pq.Int64Array:
			a, err := v.(driver.Valuer).Value()
			if err != nil {
				t.Fatal(err)
			}
			lits[i] = "NULL"
			if a != nil {
				lits[i] = pq.QuoteLiteral(a.(string))
			}
		case sql.NullString:
			lits[i] = "NULL"
			if v.Valid {
				lits[i] = pq.QuoteLiteral(v.String)
			}
		default:
			t.Fatalf("parameter %d: %T", i+1, a)
		}
	}
	var lines []string
	rows, err := conn.QueryxContext(ctx, `EXPLAIN EXECUTE claim(`+strings.Join(lits, ", ")+`)`)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Seq Scan on products") || !strings.Contains(plan, "Index Cond: ((client_id = $1) AND (sku = ") {
		t.Fatalf("the claim does not find products by their key:\n%s", plan)
	}
}
