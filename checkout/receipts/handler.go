package receipts

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// Queue is the River queue receipts are sent on: apart from the outbox's, so that a slow
// SMTP server never holds up event dispatch.
const Queue = "receipts"

// Handler makes the receipt of order.paid and order.refunded events (outbox.Handler); it
// ignores every other type.
type Handler struct {
	Recorder *Recorder
}

// HandleEvent records the event's receipt in the dispatch transaction and, when it is to be
// sent, inserts its send job there too (unique per receipt): the receipt and its job commit
// with the dispatch, or neither does and the dispatch runs again.
func (h *Handler) HandleEvent(ctx context.Context, tx *sql.Tx, ev outbox.Event) error {
	var kind string
	switch ev.Type {
	case outbox.OrderPaid:
		kind = KindPaid
	case outbox.OrderRefunded:
		kind = KindRefunded
	default:
		return nil
	}
	var data struct {
		Order  string `json:"order"`
		Refund string `json:"refund"`
	}
	if err := json.Unmarshal(ev.Payload, &data); err != nil {
		return fmt.Errorf("receipt for %s: payload: %w", ev.ID, err)
	}
	id, queued, err := h.Recorder.Record(ctx, tx, ev.ID, kind, data.Order, data.Refund)
	if err != nil {
		return fmt.Errorf("receipt for %s: %w", ev.ID, err)
	}
	if !queued {
		return nil
	}
	if _, err := river.ClientFromContext[*sql.Tx](ctx).InsertTx(ctx, tx, SendArgs{ReceiptID: id}, nil); err != nil {
		return fmt.Errorf("receipt for %s: insert send job: %w", ev.ID, err)
	}
	return nil
}

// AddWorkers registers the send job's worker.
func AddWorkers(w *river.Workers, s *Sender) {
	river.AddWorker(w, &SendWorker{Sender: s})
}
