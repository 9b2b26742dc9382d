package receipts

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Recorder makes receipts: it renders one for an event and stores it, in the event's
// transaction.
type Recorder struct {
	// From is the receipts' From address; its domain ends their Message-IDs.
	From string
	// Send: an SMTP server is configured, and a stored receipt is queued for a send job.
	// Without one the receipt is kept for the console.
	Send bool
	Now  func() time.Time
	// PerMinute and PerDay bound each client's receipts in a minute and in a UTC day (0:
	// PerMinuteDefault, PerDayDefault). A receipt over either is stored refused, not sent;
	// the sale it belongs to is not touched.
	PerMinute, PerDay int
	// Refused hears of each receipt refused, with its reason (the metric); nil: not told.
	Refused func(reason string)
}

// Record renders the receipt of kind (KindPaid or KindRefunded) for event eventID about
// the order orderPublicID (and, for a refund, the refund refundPublicID, or the order's
// latest refund when empty) and stores it in tx. It returns the new receipt's id and
// whether it is queued for sending; id 0 means no new receipt: the event has one already
// (this is a run again after a crash), or the order has no customer e-mail, so there is
// nobody to send it to.
//
// An address that cannot be used safely (a line break, several mailboxes) is not sent to:
// the receipt is stored as failed, with the reason, for an operator to see. A receipt over
// the client's bounds (PerMinute, PerDay) is stored refused, with the reason, and not
// queued.
func (rc *Recorder) Record(ctx context.Context, tx *sql.Tx, eventID, kind, orderPublicID, refundPublicID string) (id int64, queued bool, _ error) {
	if kind != KindPaid && kind != KindRefunded {
		return 0, false, fmt.Errorf("receipt kind %q", kind)
	}
	return rc.record(ctx, tx, eventID, kind, orderPublicID, refundPublicID, 0)
}

// RecordInstallment is Record for the receipt of installment n (2 or later) of the order,
// paid: KindInstallment, for an installment.paid event.
func (rc *Recorder) RecordInstallment(ctx context.Context, tx *sql.Tx, eventID, orderPublicID string, n int) (id int64, queued bool, _ error) {
	if n < 2 {
		return 0, false, fmt.Errorf("installment %d: %w (the first is the order's own payment)", n, errUnusable)
	}
	return rc.record(ctx, tx, eventID, KindInstallment, orderPublicID, "", n)
}

func (rc *Recorder) record(ctx context.Context, tx *sql.Tx, eventID, kind, orderPublicID, refundPublicID string, installment int) (id int64, queued bool, _ error) {
	messageID, err := MessageID(eventID, rc.From)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", errUnusable, err)
	}
	o, err := loadOrder(ctx, tx, orderPublicID)
	if err != nil {
		return 0, false, err
	}
	if o.Email == "" {
		return 0, false, nil
	}
	var rf *refundFacts
	n := newReceipt{EventID: eventID, Kind: kind, Recipient: o.Email, MessageID: messageID, OrderID: o.ID,
		ClientID: o.ClientID, State: StateKept, CreatedAt: rc.now()}
	if kind == KindRefunded {
		r, err := loadRefund(ctx, tx, o.ID, refundPublicID)
		if err != nil {
			return 0, false, err
		}
		rf, n.RefundID = &r, sql.NullInt64{Int64: r.ID, Valid: true}
	}
	var inst *installmentFacts
	if kind == KindInstallment {
		in, err := loadInstallment(ctx, tx, o.ID, installment)
		if err != nil {
			return 0, false, err
		}
		inst = &in
	}
	m, err := compose(o, rf, inst, messageID)
	if err != nil {
		return 0, false, err
	}
	if n.Subject, n.Text, n.HTML, err = render(ctx, m); err != nil {
		return 0, false, err
	}
	switch {
	case checkRecipient(o.Email) != nil:
		n.State, n.LastError = StateFailed, sql.NullString{String: errBadRecipient.Error(), Valid: true}
	case rc.Send:
		n.State = StateQueued
	}
	id, err = insertReceipt(ctx, tx, n)
	if err != nil || id == 0 {
		return id, false, err
	}
	if n.State == StateFailed {
		return id, false, nil // never sent: not counted
	}
	// Counted once the receipt is in: an event dispatched again finds it there (id 0) and
	// takes no second count.
	reason, err := takeCount(ctx, tx, o.ClientID, n.CreatedAt, rc.bound(rc.PerMinute, PerMinuteDefault), rc.bound(rc.PerDay, PerDayDefault))
	if err != nil {
		return 0, false, err
	}
	if reason != "" {
		if err := refuseReceipt(ctx, tx, id, reason); err != nil {
			return 0, false, err
		}
		if rc.Refused != nil {
			rc.Refused(reason)
		}
		return id, false, nil
	}
	return id, n.State == StateQueued, nil
}

func (rc *Recorder) bound(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func (rc *Recorder) now() time.Time {
	if rc.Now == nil {
		return time.Now()
	}
	return rc.Now()
}
