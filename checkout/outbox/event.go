package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// The event types. The database refuses any other (the event_type domain).
const (
	OrderPaid           = "order.paid"
	OrderDeclined       = "order.declined"
	OrderRefunded       = "order.refunded"
	RefundCreated       = "refund.created"
	OrderDisputed       = "order.disputed"
	OrderNeedsAttention = "order.needs_attention"
	CompensationCreated = "compensation.created"
	// The installments after the first, charged by the scheduled job: paid; declined and
	// tried again on a given day; declined on the last retry or refused by the provider,
	// for an operator.
	InstallmentPaid           = "installment.paid"
	InstallmentDeclined       = "installment.declined"
	InstallmentNeedsAttention = "installment.needs_attention"
)

// Types lists every event type, in the order docs/outbox.md documents them.
var Types = []string{OrderPaid, OrderDeclined, OrderRefunded, RefundCreated, OrderDisputed,
	OrderNeedsAttention, CompensationCreated, InstallmentPaid, InstallmentDeclined, InstallmentNeedsAttention}

// Event is one row of outbox_events.
type Event struct {
	// ID is the event's public id, 'evt_' and 32 hex digits: what consumers deduplicate on.
	ID       string
	ClientID int64
	Type     string
	// OrderID is the order's internal id, for joins inside tekrar; the order's public id is
	// in Payload ("order"). Every type has an order today; the column allows none.
	OrderID sql.NullInt64
	// Payload is the event's data object, as documented per type in docs/outbox.md.
	Payload   json.RawMessage
	CreatedAt time.Time
}

// Body is the event as consumers receive it, the same for every channel:
//
//	{"id": "evt_…", "type": "order.paid", "created_at": "2026-…Z", "data": {…}}
func (e Event) Body() ([]byte, error) {
	b, err := json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		CreatedAt time.Time       `json:"created_at"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.CreatedAt.UTC(), e.Payload})
	if err != nil {
		return nil, fmt.Errorf("event %s body: %w", e.ID, err)
	}
	return b, nil
}

// Sequence is the event's order sequence (SequenceField in its data), and false for an
// event about no order or written before orders had one (migration 43).
func (e Event) Sequence() (int64, bool) {
	var d struct {
		Sequence *int64 `json:"sequence"`
	}
	if err := json.Unmarshal(e.Payload, &d); err != nil || d.Sequence == nil {
		return 0, false
	}
	return *d.Sequence, true
}

// Querier is what reads and writes events: a *sql.Tx, a *sql.DB, or sqlx's equivalents.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Insert writes an event, queued for dispatch, in tx: call it in the transaction that
// makes the change the event describes. data is marshalled to the event's Payload, to
// which the statement adds the order's sequence (SequenceField) when orderID is valid.
// Statements that make their change in one SQL statement write their events there
// instead, splicing InsertSQL.
func Insert(ctx context.Context, tx Querier, clientID int64, typ string, orderID sql.NullInt64, data any) (Event, error) {
	payload, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("%s payload: %w", typ, err)
	}
	ev := Event{ClientID: clientID, Type: typ, OrderID: orderID}
	var stored []byte // with the order's sequence, which the statement adds
	if err := tx.QueryRowContext(ctx, insertSQL, clientID, typ, orderID, string(payload)).Scan(&ev.ID, &stored, &ev.CreatedAt); err != nil {
		return Event{}, fmt.Errorf("insert %s event: %w", typ, err)
	}
	ev.Payload = stored
	return ev, nil
}

const getSQL = `-- name: OutboxGet :one
SELECT id, client_id, type, order_id, payload, created_at FROM outbox_events WHERE id = $1`

// Get reads one event; sql.ErrNoRows if there is none.
func Get(ctx context.Context, q Querier, id string) (Event, error) {
	var ev Event
	var payload []byte
	err := q.QueryRowContext(ctx, getSQL, id).Scan(&ev.ID, &ev.ClientID, &ev.Type, &ev.OrderID, &payload, &ev.CreatedAt)
	if err != nil {
		return Event{}, fmt.Errorf("get event %s: %w", id, err)
	}
	ev.Payload = payload
	return ev, nil
}
