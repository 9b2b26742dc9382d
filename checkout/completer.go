package checkout

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// orderView is an order as its 201 shows it, read back from the database.
func (s *Service) orderView(ctx context.Context, orderID int64) (OrderView, error) {
	r, err := getOrder(ctx, s.q, `o.id = $1`, orderID)
	if err != nil {
		return OrderView{}, fmt.Errorf("read order %d: %w", orderID, err)
	}
	v, err := r.view()
	if err != nil {
		return OrderView{}, err
	}
	v.Payment = nil
	return v, s.withInstallments(ctx, &v, orderID)
}

// markAttention hands a key to an operator, with its order's order.needs_attention event
// (a refund's key names the refund's order) written by the same statement, fenced with it.
func markAttention(ctx context.Context, db sqlx.ExecerContext, k *Key, reason string) error {
	_, err := db.ExecContext(ctx, `
		WITH k AS (
		    UPDATE idempotency_keys SET state = 'needs_attention', attention_reason = $3, lease_expires_at = NULL
		     WHERE id = $1 AND lease_token = $2 AND state = 'in_progress'
		    RETURNING order_id, refund_id, attention_reason
		), new_events (client_id, type, order_id, payload, created_at) AS (
		    SELECT o.client_id, `+outbox.TypeSQL(outbox.OrderNeedsAttention)+`, o.id, `+orderPayloadSQL+` || jsonb_build_object(
		               'refund', r.public_id, 'reason', k.attention_reason), now()
		      FROM k
		      LEFT JOIN refunds r ON r.id = k.refund_id
		      JOIN orders o ON o.id = coalesce(k.order_id, r.order_id)
		)`+outbox.InsertSQL, k.ID, k.LeaseToken, reason)
	if err != nil {
		return fmt.Errorf("mark needs attention: %w", err)
	}
	return nil
}
