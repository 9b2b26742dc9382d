package receipts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// Queue is the River queue receipts are sent on: apart from the outbox's, so that a slow
// SMTP server never holds up event dispatch.
const Queue = "receipts"

// Handler makes the receipt of order.paid, order.refunded and installment.paid events
// (outbox.Handler); it ignores every other type.
type Handler struct {
	Recorder *Recorder
	// Logger hears of events that cannot have a receipt (nil: not told).
	Logger *slog.Logger
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
	case outbox.InstallmentPaid:
		kind = KindInstallment
	default:
		return nil
	}
	var data struct {
		Order       string `json:"order"`
		Refund      string `json:"refund"`
		Installment struct {
			N int `json:"n"`
		} `json:"installment"`
	}
	if err := json.Unmarshal(ev.Payload, &data); err != nil {
		return h.skip(ev, fmt.Errorf("payload: %w: %w", errUnusable, err))
	}
	var id int64
	var queued bool
	var err error
	if kind == KindInstallment {
		id, queued, err = h.Recorder.RecordInstallment(ctx, tx, ev.ID, data.Order, data.Installment.N)
	} else {
		id, queued, err = h.Recorder.Record(ctx, tx, ev.ID, kind, data.Order, data.Refund)
	}
	if errors.Is(err, errUnusable) {
		return h.skip(ev, err)
	}
	if err != nil {
		return fmt.Errorf("receipt for %s: %w", ev.ID, err)
	}
	if !queued {
		return nil
	}
	jobs := outbox.Jobs(ctx)
	if jobs == nil {
		return fmt.Errorf("receipt for %s: no River client to queue its sending with", ev.ID)
	}
	if _, err := jobs.InsertTx(ctx, tx, SendArgs{ReceiptID: id}, nil); err != nil {
		return fmt.Errorf("receipt for %s: insert send job: %w", ev.ID, err)
	}
	return nil
}

// skip lets an event that can have no receipt go: retrying its dispatch would not change
// that, and would hold up the event's other consumers (client webhooks) for nothing.
func (h *Handler) skip(ev outbox.Event, err error) error {
	if h.Logger != nil {
		h.Logger.Warn("no receipt for event", "event", ev.ID, "type", ev.Type, "err", err)
	}
	return nil
}

// AddWorkers registers the send job's worker.
func AddWorkers(w *river.Workers, s *Sender) {
	river.AddWorker(w, &SendWorker{Sender: s})
}
