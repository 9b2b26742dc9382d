package psp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/db"
)

// Event types the sandbox sends, as a card processor's webhooks name them.
const (
	EventChargeSucceeded = "charge.succeeded" // a charge was made (also one its caller never heard of)
	EventChargeFailed    = "charge.failed"    // a charge was declined
	EventChargeRefunded  = "charge.refunded"  // the charge is refunded in full
	EventRefundSucceeded = "refund.succeeded" // a refund was made, by tekrar or in the dashboard
	EventDisputeCreated  = "dispute.created"  // the cardholder disputed the charge
	EventDisputeClosed   = "dispute.closed"   // the dispute was decided (won or lost)
)

// Event is one notification, as its webhook body carries it.
type Event struct {
	ID      string    `json:"id"` // "evt_" and random characters; the same on every delivery
	Type    string    `json:"type"`
	Created time.Time `json:"created"`
	Data    EventData `json:"data"`
}

// EventData is the state of the charge after the change the event reports. Sequence numbers
// the events of one charge from 1: a receiver applies an event only if it is newer than the
// last it applied for the charge, so late or repeated events never move a charge backwards.
type EventData struct {
	ChargeID       string   `json:"charge_id"`
	ChargeKey      string   `json:"charge_key"`            // the provider-side key the charge was made under
	Description    string   `json:"description,omitempty"` // the merchant's, as given with the charge
	Sequence       int      `json:"sequence"`
	Amount         int64    `json:"amount"`
	Currency       string   `json:"currency"`
	Status         string   `json:"status"` // succeeded or declined
	DeclineCode    string   `json:"decline_code,omitempty"`
	CardBrand      string   `json:"card_brand,omitempty"`
	CardLast4      string   `json:"card_last4,omitempty"`
	RefundedAmount int64    `json:"refunded_amount"`
	Refund         *Refund  `json:"refund,omitempty"`  // refund.succeeded
	Dispute        *Dispute `json:"dispute,omitempty"` // dispute.created, dispute.closed
}

// Dispute statuses.
const (
	DisputeOpen = "open"
	DisputeWon  = "won"  // decided for the merchant: the money stays
	DisputeLost = "lost" // decided for the cardholder: the amount is taken back
)

// Dispute is a cardholder's dispute of a charge.
type Dispute struct {
	ID       string     `json:"id" db:"id"` // "dp_" and random characters
	ChargeID string     `json:"charge_id" db:"charge_id"`
	Amount   int64      `json:"amount" db:"amount"`
	Reason   string     `json:"reason" db:"reason"`
	Status   string     `json:"status" db:"status"`
	Created  time.Time  `json:"created" db:"created_at"`
	Closed   *time.Time `json:"closed,omitempty" db:"closed_at"`
}

// newEvent builds an event and its body.
func newEvent(typ string, at time.Time, data EventData) (Event, []byte, error) {
	e := Event{ID: newID("evt_"), Type: typ, Created: at.UTC(), Data: data}
	body, err := json.Marshal(e)
	if err != nil {
		return Event{}, nil, fmt.Errorf("psp sandbox: encode event: %w", err)
	}
	return e, body, nil
}

// emit writes the next event of a charge inside tx, which must hold the charge's row lock
// (FOR UPDATE) so that sequence numbers are handed out one at a time. It does nothing when
// the sandbox sends no webhooks.
func (s *Sandbox) emit(ctx context.Context, tx *sqlx.Tx, chargeID, typ string, at time.Time, fill func(*EventData)) error {
	if s.hooks == nil {
		return nil
	}
	var r struct {
		ChargeID    string `db:"charge_id"`
		ChargeKey   string `db:"charge_key"`
		Amount      int64  `db:"amount"`
		Currency    string `db:"currency"`
		Status      string `db:"status"`
		DeclineCode string `db:"decline_code"`
		Description string `db:"description"`
		CardBrand   string `db:"card_brand"`
		CardLast4   string `db:"card_last4"`
		Refunded    int64  `db:"refunded_amount"`
		Seq         int    `db:"seq"`
	}
	err := tx.GetContext(ctx, &r, `
		SELECT c.id AS charge_id, c.key AS charge_key, coalesce(c.amount, 0) AS amount,
		       coalesce(c.currency, '') AS currency, c.status, c.decline_code, c.description, c.card_brand, c.card_last4, c.refunded_amount,
		       (SELECT coalesce(max(seq), 0) + 1 FROM psp_events WHERE charge_id = c.id) AS seq
		  FROM psp_charges c WHERE c.id = $1`, chargeID)
	if err != nil {
		return fmt.Errorf("psp sandbox: event %s: read charge: %w", typ, err)
	}
	d := EventData{ChargeID: r.ChargeID, ChargeKey: r.ChargeKey, Description: r.Description, Sequence: r.Seq, Amount: r.Amount,
		Currency: r.Currency, Status: r.Status, DeclineCode: r.DeclineCode, CardBrand: r.CardBrand, CardLast4: r.CardLast4,
		RefundedAmount: r.Refunded}
	if fill != nil {
		fill(&d)
	}
	if d.Dispute == nil {
		// The charge's whole state: its latest dispute, if it has one, rides on every event.
		var dp Dispute
		err := tx.GetContext(ctx, &dp, `
			SELECT id, charge_id, amount, reason, status, created_at, closed_at FROM psp_disputes
			 WHERE charge_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`, chargeID)
		switch {
		case err == nil:
			d.Dispute = &dp
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("psp sandbox: event %s: read dispute: %w", typ, err)
		}
	}
	e, body, err := newEvent(typ, at, d)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO psp_events (id, type, charge_id, seq, body, created_at, next_attempt_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6)`, e.ID, e.Type, chargeID, d.Sequence, string(body), at); err != nil {
		return fmt.Errorf("psp sandbox: record event %s: %w", typ, err)
	}
	return nil
}

// emitRefund writes a refund's events: refund.succeeded, and charge.refunded when it
// completes the charge's refund.
func (s *Sandbox) emitRefund(ctx context.Context, tx *sqlx.Tx, rf Refund) error {
	if err := s.emit(ctx, tx, rf.ChargeID, EventRefundSucceeded, rf.Created, func(d *EventData) { d.Refund = &rf }); err != nil {
		return err
	}
	var whole bool
	if err := tx.GetContext(ctx, &whole, `SELECT refunded_amount = amount FROM psp_charges WHERE id = $1`, rf.ChargeID); err != nil {
		return fmt.Errorf("psp sandbox: refund event: %w", err)
	}
	if !whole {
		return nil
	}
	return s.emit(ctx, tx, rf.ChargeID, EventChargeRefunded, rf.Created, nil)
}

// OpenDispute is the dashboard's "the cardholder disputed this charge": a dispute of amount
// (at most the charge's) with reason, and its dispute.created event.
func (s *Sandbox) OpenDispute(ctx context.Context, chargeID string, amount int64, reason string) (Dispute, error) {
	if amount <= 0 {
		return Dispute{}, fmt.Errorf("%w: amount must be positive", ErrInvalidRequest)
	}
	if err := checkText("charge_id", chargeID, "reason", reason); err != nil {
		return Dispute{}, err
	}
	var d Dispute
	err := s.inChargeTx(ctx, chargeID, func(tx *sqlx.Tx, status string, charged int64) error {
		if status != StatusSucceeded {
			return fmt.Errorf("%w: charge %s is %s", ErrNotRefundable, chargeID, status)
		}
		if amount > charged {
			return fmt.Errorf("%w: a dispute of %d exceeds the charge's %d", ErrInvalidRequest, amount, charged)
		}
		now := s.now()
		if err := tx.GetContext(ctx, &d, `
			INSERT INTO psp_disputes (id, charge_id, amount, reason, status, created_at)
			VALUES ($1, $2, $3, $4, 'open', $5)
			RETURNING id, charge_id, amount, reason, status, created_at, closed_at`,
			newID("dp_"), chargeID, amount, reason, now); err != nil {
			return fmt.Errorf("psp sandbox: record dispute: %w", err)
		}
		return s.emit(ctx, tx, chargeID, EventDisputeCreated, now, func(e *EventData) { e.Dispute = &d })
	})
	return d, err
}

// CloseDispute is the dashboard's decision of an open dispute: won (the merchant keeps the
// money) or lost. Closing a closed dispute is ErrInvalidRequest.
func (s *Sandbox) CloseDispute(ctx context.Context, disputeID string, won bool) (Dispute, error) {
	var chargeID string
	err := s.db.GetContext(ctx, &chargeID, `SELECT charge_id FROM psp_disputes WHERE id = $1`, disputeID)
	if errors.Is(err, sql.ErrNoRows) {
		return Dispute{}, fmt.Errorf("%w: no dispute has id %q", ErrNotFound, disputeID)
	}
	if err != nil {
		return Dispute{}, fmt.Errorf("psp sandbox: close dispute: %w", err)
	}
	status := DisputeLost
	if won {
		status = DisputeWon
	}
	var d Dispute
	err = s.inChargeTx(ctx, chargeID, func(tx *sqlx.Tx, _ string, _ int64) error {
		now := s.now()
		err := tx.GetContext(ctx, &d, `
			UPDATE psp_disputes SET status = $2, closed_at = $3 WHERE id = $1 AND status = 'open'
			RETURNING id, charge_id, amount, reason, status, created_at, closed_at`, disputeID, status, now)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: dispute %s is closed already", ErrInvalidRequest, disputeID)
		}
		if err != nil {
			return fmt.Errorf("psp sandbox: close dispute: %w", err)
		}
		return s.emit(ctx, tx, chargeID, EventDisputeClosed, now, func(e *EventData) { e.Dispute = &d })
	})
	return d, err
}

// DashboardRefund is a refund made in the provider's dashboard, outside tekrar: under a key
// of the dashboard's own.
func (s *Sandbox) DashboardRefund(ctx context.Context, chargeID string, amount int64, reason string) (Refund, error) {
	return s.Refund(ctx, RefundRequest{Key: newID("dashboard_"), ChargeID: chargeID, Amount: amount, Reason: reason})
}

// inChargeTx runs f in a transaction holding charge chargeID's row lock.
func (s *Sandbox) inChargeTx(ctx context.Context, chargeID string, f func(tx *sqlx.Tx, status string, amount int64) error) error {
	tx, err := s.db.BeginTxx(db.Detach(ctx), nil)
	if err != nil {
		return fmt.Errorf("psp sandbox: begin: %w", err)
	}
	defer tx.Rollback()
	var c struct {
		Status string `db:"status"`
		Amount int64  `db:"amount"`
	}
	err = tx.GetContext(ctx, &c, `SELECT status, coalesce(amount, 0) AS amount FROM psp_charges WHERE id = $1 FOR UPDATE`, chargeID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: no charge has id %q", ErrNotFound, chargeID)
	}
	if err != nil {
		return fmt.Errorf("psp sandbox: lock charge: %w", err)
	}
	if err := f(tx, c.Status, c.Amount); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("psp sandbox: commit: %w", err)
	}
	return nil
}
