package stdwebhook

import (
	"context"
	"database/sql"
	"fmt"
)

// ReceiptsTable is the table Receive records message ids in, for the receiver's own
// Postgres. Create it once (and delete rows older than the sender's retry horizon now and
// then: a message is not redelivered after it).
const ReceiptsTable = `
CREATE TABLE IF NOT EXISTS webhook_receipts (
    id          text        PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now()
)`

// Receive applies a verified message once, however often it is delivered: in one
// transaction it records the message's id (webhook-id) under the table's primary key and
// runs apply. A redelivery finds the id and is a duplicate: apply does not run, and the
// sender should be answered 2xx all the same. If apply fails, nothing is recorded and the
// sender's retry applies the message again; concurrent deliveries of one id wait for each
// other on the key, so apply runs once.
//
// db must be Postgres (the statement uses $1 and ON CONFLICT).
func Receive(ctx context.Context, db *sql.DB, msg Message, apply func(tx *sql.Tx) error) (duplicate bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("webhook: receive %s: %w", msg.ID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO webhook_receipts (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, msg.ID)
	if err != nil {
		return false, fmt.Errorf("webhook: record %s: %w", msg.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err == nil, err
	}
	if err := apply(tx); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("webhook: receive %s: commit: %w", msg.ID, err)
	}
	return false, nil
}
