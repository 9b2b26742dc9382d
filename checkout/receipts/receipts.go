// Package receipts e-mails a customer a receipt when their order is paid or refunded, and
// for each later installment charged of an order paid in installments.
//
// A receipt is made by an outbox event's handler, inside the event's dispatch transaction:
// it is rendered (views.ReceiptHTML and views.ReceiptText), stored in the receipts table
// once per event, and, when an SMTP server is configured, handed to a send job inserted in
// the same transaction. Without an SMTP server (the dev default) the receipt is kept, for
// the console to show; it is never dropped.
//
// The stored receipt is what is sent: the send job builds the MIME message from the row,
// byte for byte the same on every attempt, with a Message-ID derived from the event. A
// resend after a crash (the SMTP server accepted the message, the process died before
// recording it) therefore carries the Message-ID of the first send, and the customer's mail
// client or a deduplicating relay recognises it.
//
// Each client's receipts are bounded per minute and per UTC day (Recorder.PerMinute,
// PerDay), counted in receipt_counts in the same transaction; one over a bound is stored
// refused, never sent, and the sale it belongs to is not touched.
//
// The package must not import checkout (checkout dispatches events to it); it reads the
// orders, payments and refunds it needs with its own SQL.
package receipts

import (
	"time"
)

// Kinds of receipt, by the event that makes them.
const (
	KindPaid        = "paid"        // order.paid
	KindRefunded    = "refunded"    // order.refunded
	KindInstallment = "installment" // installment.paid: a later installment of an order, charged
)

// States of a receipt.
const (
	StateKept   = "kept"   // no SMTP server configured: shown on the console, not sent
	StateQueued = "queued" // a send job owns it (attempts and LastError say how it goes)
	StateSent   = "sent"   // the SMTP server accepted it
	StateFailed = "failed" // refused for good, or the send job gave up
	// StateRefused: over the client's bounds (RefusedReason says which); kept, never sent.
	StateRefused = "refused"
)

// Why a receipt was refused (Receipt.RefusedReason, the reason label of
// tekrar_receipts_refused_total).
const (
	ReasonRateLimited = "rate_limited" // the client's receipts of the minute reached PerMinute
	ReasonDailyCap    = "daily_cap"    // the client's receipts of the UTC day reached PerDay
)

// Bounds of a client's receipts when Recorder leaves them zero, and the defaults of
// TEKRAR_RECEIPTS_PER_MINUTE and TEKRAR_RECEIPTS_PER_DAY: a register sending a day of
// offline sales at once stays under the minute's, a busy shop under the day's.
const (
	PerMinuteDefault = 600
	PerDayDefault    = 10_000
)

// Receipt is one row of the receipts table.
type Receipt struct {
	ID            int64      `db:"id"`
	EventID       string     `db:"event_id"`
	OrderPublicID string     `db:"order_public_id"`
	ClientID      int64      `db:"client_id"`
	ClientName    string     `db:"client_name"`
	Kind          string     `db:"kind"`
	Recipient     string     `db:"recipient"`
	Subject       string     `db:"subject"`
	MessageID     string     `db:"message_id"`
	BodyText      string     `db:"body_text"`
	BodyHTML      string     `db:"body_html"`
	State         string     `db:"state"`
	Attempts      int        `db:"attempts"`
	LastError     *string    `db:"last_error"`
	RefusedReason *string    `db:"refused_reason"`
	CreatedAt     time.Time  `db:"created_at"`
	SentAt        *time.Time `db:"sent_at"`
	// ClientTimeZone is the client's IANA zone, in which the console shows the receipt's
	// times, as the receipt itself writes them.
	ClientTimeZone string `db:"client_time_zone"`
}
