package migrations_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// A valid row of each table written by a payment, as column → SQL expression. The fixture
// below provides client 1, order 1 (paid, no payment row yet) and charge 'ch_fixture'.
var validRows = map[string]map[string]string{
	"orders": {
		"client_id": "1", "status": "'paid'", "amount": "1000", "currency": "'TRY'", "items": "'[]'",
		"captured_amount": "1000", "refunded_amount": "0", "created_at": "now()", "updated_at": "now()",
	},
	"payments": {
		"order_id": "1", "provider_charge_id": "'ch_p'", "provider_key": "'pk-p'", "amount": "1000",
		"currency": "'TRY'", "status": "'succeeded'", "created_at": "now()",
	},
	"refunds": {
		"order_id": "1", "client_id": "1", "amount": "100", "currency": "'TRY'", "status": "'pending'",
		"provider_key": "'rk-r'", "created_at": "now()", "updated_at": "now()",
	},
	"idempotency_keys": {
		"client_id": "1", "key": "'k'", "fingerprint": "sha256('x')", "method": "'POST'", "path": "'/v1/orders'",
		"state": "'in_progress'", "recovery_point": "'order_created'", "order_id": "1",
		"created_at": "now()", "expires_at": "now() + interval '1 day'",
	},
	"psp_charges": {
		"id": "'ch_1'", "key": "'pk-1'", "amount": "1000", "currency": "'TRY'",
		"card_token_fingerprint": "sha256('t')", "status": "'succeeded'", "created_at": "now()",
	},
	"compensations": {
		"client_id": "1", "order_id": "1", "charge_key": "'pk-c'", "reason": "'test'",
		"next_attempt_at": "now()", "watch_until": "now() + interval '1 day'", "created_at": "now()",
	},
	"reconciliation_runs": {
		"process": "'host:1'", "scheduled": "false", "window_start": "now() - interval '1 day'",
		"window_end": "now()", "started_at": "now()",
	},
	"outbox_events": {
		"client_id": "1", "type": "'order.paid'", "order_id": "1", "payload": `'{"order":"x"}'`,
	},
	"psp_refunds": {
		"id": "'re_1'", "key": "'prk-1'", "charge_id": "'ch_fixture'", "amount": "10", "created_at": "now()",
	},
}

const rulesFixture = `
INSERT INTO clients (name, secret_hash) VALUES ('rules', sha256('secret'));
INSERT INTO orders (client_id, status, amount, currency, items, captured_amount, created_at, updated_at)
VALUES (1, 'paid', 1000, 'TRY', '[]', 1000, now(), now());
INSERT INTO psp_charges (id, key, amount, currency, card_token_fingerprint, status, created_at)
VALUES ('ch_fixture', 'pk-fixture', 1000, 'TRY', sha256('t'), 'succeeded', now());`

// TestTheDatabaseRefusesImpossibleRows writes rows that break one rule each, on insert and
// on update, and expects Postgres to refuse them (check_violation), whether the rule is a
// domain or a table CHECK. The valid rows are written first, so that a refusal is the
// rule's doing and not the fixture's.
func TestTheDatabaseRefusesImpossibleRows(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := d.ExecContext(ctx, rulesFixture); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	for table, row := range validRows {
		if err := tryInsert(ctx, d, table, row, nil); err != nil {
			t.Fatalf("the valid %s row is refused: %v", table, err)
		}
	}

	inserts := []struct {
		table string
		set   map[string]string
	}{
		{"orders", map[string]string{"status": "'shipped'"}},
		{"orders", map[string]string{"amount": "0", "captured_amount": "0"}},
		{"orders", map[string]string{"currency": "'try'"}},
		{"orders", map[string]string{"currency": "'TRYX'"}},
		{"orders", map[string]string{"captured_amount": "500"}},
		{"orders", map[string]string{"refunded_amount": "1001"}},
		{"orders", map[string]string{"refunded_amount": "-1"}},
		{"orders", map[string]string{"public_id": "'1'"}},
		{"orders", map[string]string{"public_id": "'ord_1'"}},
		{"orders", map[string]string{"public_id": "'rf_' || repeat('a', 32)"}},
		{"payments", map[string]string{"amount": "0"}},
		{"payments", map[string]string{"status": "'pending'"}},
		{"refunds", map[string]string{"amount": "-100"}},
		{"refunds", map[string]string{"status": "'done'"}},
		{"refunds", map[string]string{"public_id": "'ord_' || repeat('a', 32)"}},
		{"refunds", map[string]string{"public_id": "'rf_' || repeat('A', 32)"}},
		{"idempotency_keys", map[string]string{"key": "''"}},
		{"idempotency_keys", map[string]string{"key": "repeat('k', 256)"}},
		{"idempotency_keys", map[string]string{"fingerprint": `'\x00'::bytea`}},
		{"idempotency_keys", map[string]string{"state": "'done'"}},
		{"idempotency_keys", map[string]string{"recovery_point": "'charged'"}},
		{"idempotency_keys", map[string]string{"order_id": "NULL"}},
		{"idempotency_keys", map[string]string{"refund_id": "1"}},
		{"idempotency_keys", map[string]string{"state": "'completed'"}},
		{"idempotency_keys", map[string]string{"response_status": "201", "response_body": `'\x7b7d'`}},
		{"idempotency_keys", map[string]string{"state": "'completed'", "recovery_point": "'finished'", "response_status": "201"}},
		{"idempotency_keys", map[string]string{"state": "'completed'", "recovery_point": "'finished'", "response_body": `'\x7b7d'`}},
		{"psp_charges", map[string]string{"id": "'x_1'"}},
		{"psp_charges", map[string]string{"key": "''"}},
		{"psp_charges", map[string]string{"amount": "0"}},
		{"psp_charges", map[string]string{"currency": "'TR'"}},
		{"psp_charges", map[string]string{"card_token_fingerprint": `'\x01'::bytea`}},
		{"psp_charges", map[string]string{"status": "'pending'"}},
		{"psp_charges", map[string]string{"card_last4": "'42'"}},
		{"psp_charges", map[string]string{"status": "'declined'"}},
		{"psp_charges", map[string]string{"decline_code": "'do_not_honor'"}},
		{"psp_charges", map[string]string{"refunded_amount": "1001"}},
		{"psp_charges", map[string]string{"status": "'declined'", "decline_code": "'do_not_honor'", "refunded_amount": "10"}},
		{"psp_charges", map[string]string{"status": "'canceled'"}}, // a canceled key holds no card or amount
		{"psp_charges", map[string]string{"status": "'canceled'", "card_token_fingerprint": "NULL"}},
		{"psp_charges", map[string]string{"card_token_fingerprint": "NULL", "amount": "NULL", "currency": "NULL"}},
		{"psp_charges", map[string]string{"status": "'canceled'", "card_token_fingerprint": "NULL", "amount": "NULL"}},
		// a canceled key is a fence, which a key-less charge (a key as reference only) never has
		{"psp_charges", map[string]string{"keyed": "false", "status": "'canceled'", "card_token_fingerprint": "NULL", "amount": "NULL", "currency": "NULL"}},
		{"compensations", map[string]string{"state": "'lost'"}},
		{"compensations", map[string]string{"state": "'refunded'"}},
		{"compensations", map[string]string{"state": "'refunded'", "settled_at": "now()"}},
		{"compensations", map[string]string{"settled_at": "now()"}},
		{"compensations", map[string]string{"refund_id": "'re_x'", "settled_at": "now()", "state": "'refunded'"}},
		{"compensations", map[string]string{"charge_key": "''"}},
		{"compensations", map[string]string{"source": "'webhook'"}},
		{"compensations", map[string]string{"order_id": "NULL", "client_id": "NULL"}}, // only reconciliation finds a charge with no order
		{"compensations", map[string]string{"order_id": "NULL", "source": "'reconcile'"}},
		{"reconciliation_runs", map[string]string{"window_end": "now() - interval '2 days'"}},
		{"reconciliation_runs", map[string]string{"process": "''"}},
		{"outbox_events", map[string]string{"type": "'order.shipped'"}},
		{"outbox_events", map[string]string{"id": "'evt_1'"}},
		{"outbox_events", map[string]string{"payload": "'[]'"}},
		{"psp_refunds", map[string]string{"id": "'x_1'"}},
		{"psp_refunds", map[string]string{"key": "''"}},
		{"psp_refunds", map[string]string{"amount": "0"}},
		{"psp_refunds", map[string]string{"status": "'failed'"}},
	}
	for _, c := range inserts {
		t.Run(fmt.Sprintf("insert %s %v", c.table, c.set), func(t *testing.T) {
			expectCheckViolation(t, tryInsert(ctx, d, c.table, validRows[c.table], c.set))
		})
	}

	// Domains are checked when a column is set, table CHECKs at every write: both refuse an
	// update that breaks them.
	for _, q := range []string{
		`UPDATE orders SET status = 'shipped' WHERE id = 1`,
		`UPDATE orders SET public_id = '17' WHERE id = 1`,
		`UPDATE orders SET refunded_amount = 1001 WHERE id = 1`,
		`UPDATE orders SET captured_amount = 0, refunded_amount = 10 WHERE id = 1`,
		`UPDATE psp_charges SET status = 'declined' WHERE id = 'ch_fixture'`,
		`UPDATE psp_charges SET refunded_amount = 1001 WHERE id = 'ch_fixture'`,
		`UPDATE psp_charges SET status = 'canceled' WHERE id = 'ch_fixture'`,
	} {
		t.Run(q, func(t *testing.T) {
			expectCheckViolation(t, inRolledBackTx(ctx, d, q))
		})
	}
}

// tryInsert inserts row, with set's columns replaced or added, and rolls back.
func tryInsert(ctx context.Context, d *sqlx.DB, table string, row, set map[string]string) error {
	vals := map[string]string{}
	for c, v := range row {
		vals[c] = v
	}
	for c, v := range set {
		vals[c] = v
	}
	cols := make([]string, 0, len(vals))
	for c := range vals {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = vals[c]
	}
	return inRolledBackTx(ctx, d, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)",
		pq.QuoteIdentifier(table), strings.Join(cols, ", "), strings.Join(exprs, ", ")))
}

func inRolledBackTx(ctx context.Context, d *sqlx.DB, q string) error {
	tx, err := d.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, q)
	return err
}

func expectCheckViolation(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if e := pq.As(err, pqerror.CheckViolation); e == nil {
		t.Fatalf("refused, but not by a rule: %v", err)
	}
}
