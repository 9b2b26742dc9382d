package dbtest

import (
	"testing"

	"github.com/jmoiron/sqlx"
)

// LoseOrder deletes every row tekrar holds of the order with that public id, and of the keys
// that made it and its refunds, in one transaction: what a restore from a backup taken before
// the order, or a failover under asynchronous replication, would have lost. The sandbox
// provider's ledger (psp_charges, psp_refunds) is not touched, so it keeps what the order
// charged: the lost-row tests resend the request and check that nothing is done twice.
func LoseOrder(t testing.TB, db *sqlx.DB, publicID string) {
	t.Helper()
	const refunds = `SELECT r.id FROM refunds r WHERE r.order_id = $1`
	const keys = `SELECT k.id FROM idempotency_keys k WHERE k.order_id = $1 OR k.refund_id IN (` + refunds + `)`
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	var id int64
	if err := tx.Get(&id, `SELECT id FROM orders WHERE public_id = $1`, publicID); err != nil {
		t.Fatalf("order %s: %v", publicID, err)
	}
	for _, q := range []string{
		`DELETE FROM key_events WHERE key_id IN (` + keys + `)`,
		`DELETE FROM idempotency_keys WHERE id IN (` + keys + `)`,
		`DELETE FROM outbox_queue WHERE event_id IN (SELECT id FROM outbox_events WHERE order_id = $1)`,
		`DELETE FROM outbox_events WHERE order_id = $1`,
		`DELETE FROM receipts WHERE order_id = $1`,
		`DELETE FROM stock_movements WHERE order_id = $1 OR refund_id IN (` + refunds + `)`,
		`DELETE FROM pos_sales WHERE order_id = $1`,
		`DELETE FROM installments WHERE order_id = $1`,
		`DELETE FROM compensations WHERE order_id = $1`,
		`DELETE FROM reconciliation_findings WHERE order_id = $1`,
		`DELETE FROM refunds WHERE order_id = $1`,
		`DELETE FROM payments WHERE order_id = $1`,
		`DELETE FROM orders WHERE id = $1`,
	} {
		if _, err := tx.Exec(q, id); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
