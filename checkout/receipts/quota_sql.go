package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The SQL of receipt_counts: each client's receipts per minute and per UTC day, counted in
// the transaction that records a receipt (migration 00042).

// countSQL takes one receipt from a client's window, unless the window holds cap already:
// then it returns no row. The row's lock, held to the transaction's end, serialises the
// client's concurrent receipts, so no two of them can both take the last place.
const countSQL = `
	INSERT INTO receipt_counts (client_id, kind, window_start, sent) VALUES ($1, $2, $3, 1)
	ON CONFLICT (client_id, kind, window_start) DO UPDATE SET sent = receipt_counts.sent + 1
	 WHERE receipt_counts.sent < $4
	RETURNING sent`

// takeCount counts a receipt of the client made at now against the day's cap, then the
// minute's limit; over either it counts nothing and says why (ReasonDailyCap,
// ReasonRateLimited). The day is UTC's, the minute the clock's: fixed windows, so a burst
// astride a minute's end may send up to twice perMinute in sixty seconds.
func takeCount(ctx context.Context, tx *sql.Tx, clientID int64, now time.Time, perMinute, perDay int) (reason string, _ error) {
	day, minute := now.UTC().Truncate(24*time.Hour), now.UTC().Truncate(time.Minute)
	sent, err := take(ctx, tx, clientID, "day", day, perDay)
	if err != nil {
		return "", err
	}
	if sent == 0 {
		return ReasonDailyCap, nil
	}
	if sent == 1 {
		// The client's first receipt of the day: its minutes before today are history no
		// bound reads again, and go (its days stay, a row each).
		if _, err := tx.ExecContext(ctx, `
			DELETE FROM receipt_counts WHERE client_id = $1 AND kind = 'minute' AND window_start < $2`,
			clientID, day); err != nil {
			return "", fmt.Errorf("forget past minutes: %w", err)
		}
	}
	if sent, err = take(ctx, tx, clientID, "minute", minute, perMinute); err != nil {
		return "", err
	}
	if sent > 0 {
		return "", nil
	}
	// Not sent: the day's place goes back (its row is locked by this transaction already).
	if _, err := tx.ExecContext(ctx, `
		UPDATE receipt_counts SET sent = sent - 1 WHERE client_id = $1 AND kind = 'day' AND window_start = $2`,
		clientID, day); err != nil {
		return "", fmt.Errorf("give back the day's count: %w", err)
	}
	return ReasonRateLimited, nil
}

// take counts one receipt in the client's window and returns the window's count with it,
// or 0 when the window was full.
func take(ctx context.Context, tx *sql.Tx, clientID int64, kind string, start time.Time, limit int) (sent int, _ error) {
	err := tx.QueryRowContext(ctx, countSQL, clientID, kind, start, limit).Scan(&sent)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("count receipt (%s): %w", kind, err)
	}
	return sent, nil
}

// refuseReceipt marks a receipt just stored as refused, for reason.
func refuseReceipt(ctx context.Context, tx *sql.Tx, id int64, reason string) error {
	if _, err := tx.ExecContext(ctx, `
		UPDATE receipts SET state = 'refused', refused_reason = $2 WHERE id = $1`, id, reason); err != nil {
		return fmt.Errorf("refuse receipt %d: %w", id, err)
	}
	return nil
}
