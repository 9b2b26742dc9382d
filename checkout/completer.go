package checkout

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
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
	_, err := markAttentionSQL.exec(ctx, db, keyed.NeedsAttention(k, reason))
	if err != nil {
		return fmt.Errorf("mark needs attention: %w", err)
	}
	return nil
}

// markAttentionSQL: see markAttention. The event step reads the key's order (or refund)
// from k, so it writes nothing when the fence matched no row.
var markAttentionSQL = named[keyed.SetState](`
	WITH k AS (` + keyed.SetStateSQL + `
	    RETURNING order_id, refund_id, attention_reason
	), new_events (client_id, type, order_id, payload, created_at) AS (
	    SELECT o.client_id, ` + outbox.TypeSQL(outbox.OrderNeedsAttention) + `, o.id, ` + orderPayloadSQL + ` || jsonb_build_object(
	               'refund', r.public_id, 'reason', k.attention_reason), now()
	      FROM k
	      LEFT JOIN refunds r ON r.id = k.refund_id
	      JOIN orders o ON o.id = coalesce(k.order_id, r.order_id)
	)` + outbox.InsertSQL)
