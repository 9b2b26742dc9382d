package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/outbox"
	"github.com/tekrar/tekrar/checkout/psp"
	tdb "github.com/tekrar/tekrar/internal/db"
)

// The provider inbox: the payment provider's webhooks, each recorded once under a unique
// (provider, event id), whatever how often it is delivered, and applied in the order of
// the charge's own sequence numbers, not in the order the deliveries arrive.
//
// Every event carries the charge's whole state after the change it reports (status,
// refunded amount, dispute), so applying "the newest state seen" is the same as applying
// every event in order: an event older than the newest one applied for its charge is
// recorded as stale and changes nothing. The events, the per-charge state and (later) the
// effect on the order commit in one transaction, so a process killed half way leaves
// nothing applied and the provider's redelivery applies it once.

// ProviderEvent is one provider webhook, verified and decoded by the API.
type providerEvent struct {
	Provider string
	ID       string
	Type     string
	Body     []byte // as received: stored for the console and for replaying the inbox
	// Charge is the state of the charge after the event; nil for an event about no charge.
	Charge *providerCharge
}

// ProviderCharge is a charge as the provider's newest event describes it.
type providerCharge struct {
	ID          string
	Key         string // the provider-side key tekrar charged under
	Description string // tekrar's reference, as given with the charge: "order <public id>" (checkout.OrderOfDescription)
	Sequence    int
	Status      string
	DeclineCode string
	CardBrand   string
	CardLast4   string
	Amount      int64
	Currency    string
	Refunded    int64
	Disputed    bool
	// Dispute is the charge's latest dispute; nil when it has none.
	Dispute *psp.Dispute
	// Refund is the refund a refund.succeeded event is about; nil for the other events.
	Refund *psp.Refund
}

// Inbox outcomes: what receiving one delivery did.
const (
	OutcomeApplied   = "applied"   // the newest state of its charge: applied
	OutcomeStale     = "stale"     // a newer event of the charge was applied first: stored, changes nothing
	OutcomeIgnored   = "ignored"   // a type tekrar does not act on: stored and acknowledged
	OutcomeDuplicate = "duplicate" // delivered before: counted, changes nothing
	// OutcomeDeadLetter (deadletters.go): signed, but not storable as it is: kept raw, acknowledged
)

// knownProviderEvents are the event types the inbox applies.
var knownProviderEvents = map[string]bool{
	"charge.succeeded": true, "charge.failed": true, "charge.refunded": true,
	"refund.succeeded": true, "dispute.created": true, "dispute.closed": true,
}

// Receive records the verified event pe (body as received) of provider and
// applies it, in one transaction.
//
// An event the database refuses as data (refusedAsData) is refused on every redelivery too:
// it is kept as a dead letter instead, and the outcome is OutcomeDeadLetter. Any other error
// is returned, for the delivery to be answered 5xx and delivered again.
func (s *Inbox) Receive(ctx context.Context, provider string, body []byte, pe psp.Event) (outcome string, err error) {
	outcome, err = s.receive(ctx, providerEventOf(provider, body, pe))
	if u, ok := refusedAsData(err); ok {
		if err := s.DeadLetter(ctx, provider, pe.ID, body, u); err != nil {
			return "", err
		}
		return OutcomeDeadLetter, nil
	}
	return outcome, err
}

// providerEventOf is the inbox's record of the decoded event pe of provider, body as received.
func providerEventOf(provider string, body []byte, pe psp.Event) providerEvent {
	e := providerEvent{Provider: provider, ID: pe.ID, Type: pe.Type, Body: body}
	if d := pe.Data; d.ChargeID != "" {
		e.Charge = &providerCharge{ID: d.ChargeID, Key: d.ChargeKey, Description: d.Description,
			Sequence: d.Sequence, Status: d.Status, DeclineCode: d.DeclineCode, CardBrand: d.CardBrand, CardLast4: d.CardLast4,
			Amount: d.Amount, Currency: d.Currency, Refunded: d.RefundedAmount,
			Disputed: d.Dispute != nil && d.Dispute.Status == psp.DisputeOpen, Dispute: d.Dispute, Refund: d.Refund}
	}
	return e
}

// receive records e and applies it, in one transaction.
func (s *Inbox) receive(ctx context.Context, e providerEvent) (outcome string, err error) {
	err = tdb.InTx(ctx, s.db, "receive provider event "+e.ID, func(tx *sqlx.Tx) error {
		var err error
		if outcome, err = s.apply(ctx, tx, e); err != nil {
			return err
		}
		s.crash(checkout.CrashInboxBeforeCommit)
		return nil
	})
	if err != nil {
		return "", err
	}
	return outcome, nil
}

// apply records e in tx (or counts its redelivery) and applies it if it is its charge's
// newest event.
func (s *Inbox) apply(ctx context.Context, tx *sqlx.Tx, e providerEvent) (string, error) {
	now := s.cfg.Now()
	var chargeID *string
	var seq *int
	if e.Charge != nil {
		chargeID, seq = &e.Charge.ID, &e.Charge.Sequence
	}
	var inserted bool
	if err := tx.GetContext(ctx, &inserted, `
		INSERT INTO provider_events (provider, event_id, type, charge_id, sequence, body, outcome,
		                             received_at, last_delivery_at)
		VALUES ($1, $2, $3, $4, $5, $6, 'ignored', $7, $7)
		ON CONFLICT (provider, event_id) DO UPDATE
		   SET deliveries = provider_events.deliveries + 1, last_delivery_at = excluded.last_delivery_at
		RETURNING xmax = 0`,
		e.Provider, e.ID, e.Type, chargeID, seq, string(e.Body), now); err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	switch {
	case !inserted:
		return OutcomeDuplicate, nil
	case e.Charge == nil || !knownProviderEvents[e.Type]:
		return OutcomeIgnored, nil
	}
	applied, err := advanceProviderCharge(ctx, tx, e.Provider, *e.Charge, now)
	if err != nil {
		return "", err
	}
	outcome := OutcomeStale
	if applied {
		outcome = OutcomeApplied
		if err := s.applyChargeToOrder(ctx, tx, *e.Charge); err != nil {
			return "", err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE provider_events SET outcome = $3 WHERE provider = $1 AND event_id = $2`,
		e.Provider, e.ID, outcome); err != nil {
		return "", fmt.Errorf("record outcome: %w", err)
	}
	return outcome, nil
}

// applyChargeToOrder makes the order the charge was made for agree with the charge's newest
// state, inside the inbox's transaction:
//
//   - a charge that succeeded or was declined while its key is still in progress (the
//     worker's answer was lost, or it is still waiting for it) settles the order as the
//     worker would have, with the key's response stored, so that the next retry replays it.
//     The key row is locked first: the worker, a client's retry or the completer finishing
//     at the same moment either committed before (the key is completed: nothing to do) or
//     finds the key completed and is fenced;
//
//   - a succeeded charge of an order canceled without a fence makes the refund owed due now.
//
//   - a paid order's refunded amount follows the charge's (syncRefunds).
//
// A charge that is on no payment of tekrar's and whose description names no order of
// tekrar's (an old description's internal id is trusted only with the charge's key:
// FindChargeOrder), or whose key is not the key tekrar derives from that order's key, is
// not tekrar's to settle (reconciliation's job).
func (s *Inbox) applyChargeToOrder(ctx context.Context, tx *sqlx.Tx, c providerCharge) (err error) {
	// A settled order is found by its payment, which names the charge's provider key (its
	// key row may have been swept long before a refund or dispute arrives), whatever the
	// description says: a charge adopted by a lost row's retry names the lost order's id
	// (docs/recovery.md, "Provider keys").
	var paidOrder int64
	err = tx.GetContext(ctx, &paidOrder, `SELECT order_id FROM payments WHERE provider_key = $1`, c.Key)
	switch {
	case err == nil:
		return s.syncSettled(ctx, tx, paidOrder, c)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("payment of charge key %s: %w", c.Key, err)
	}
	orderID, ok, err := checkout.FindChargeOrder(ctx, tx, c.Description, c.Key)
	if err != nil || !ok {
		return err
	}
	ch := psp.Charge{ID: c.ID, Key: c.Key, Amount: c.Amount, Currency: c.Currency, Status: c.Status,
		DeclineCode: c.DeclineCode, CardBrand: c.CardBrand, CardLast4: c.CardLast4}
	ours, err := s.svc.SettleProviderCharge(ctx, tx, orderID, ch)
	if err != nil || !ours {
		return err
	}
	return s.syncSettled(ctx, tx, orderID, c)
}

// syncSettled makes a settled order follow what the charge's newest state says happened to
// it after: refunds and disputes.
func (s *Inbox) syncSettled(ctx context.Context, tx *sqlx.Tx, orderID int64, c providerCharge) error {
	if err := s.syncRefunds(ctx, tx, orderID, c); err != nil {
		return err
	}
	return s.syncDispute(ctx, tx, orderID, c)
}

// syncRefunds makes a paid order's refunded amount catch up with the charge's, as the
// provider's newest event states it: refunds made at the provider, outside tekrar (its
// dashboard, a support agent), appear on the order as refunds of their own, once
// (providerRefundsSQL), also when a refusal of tekrar's own refund recorded them first.
func (s *Inbox) syncRefunds(ctx context.Context, tx *sqlx.Tx, orderID int64, c providerCharge) error {
	if c.Status != psp.StatusSucceeded || c.Refunded <= 0 {
		return nil
	}
	err := checkout.RecordProviderRefunds(ctx, tx, orderID, c.Refunded, fmt.Sprintf("provider:%s:%d", c.ID, c.Sequence), c.Refund, s.cfg.Now())
	if err != nil {
		return fmt.Errorf("refunds of order %d made at the provider: %w", orderID, err)
	}
	return nil
}

// syncDispute records the charge's latest dispute on its order and makes the order's status
// say so: disputed while the dispute is open (an operator sees it, nobody refunds it), and,
// once it is decided, what its refunds make it again. The dispute is keyed by its provider
// id, so repeated or late events change it only forward (open, then won or lost).
func (s *Inbox) syncDispute(ctx context.Context, tx *sqlx.Tx, orderID int64, c providerCharge) error {
	d := c.Dispute
	if d == nil || d.ID == "" || d.Amount <= 0 {
		return nil
	}
	var closed *time.Time
	if d.Status != psp.DisputeOpen {
		closed = d.Closed
		if closed == nil {
			now := s.cfg.Now()
			closed = &now
		}
	}
	_, err := tx.ExecContext(ctx, `
		WITH d AS (
		    INSERT INTO order_disputes (order_id, provider, dispute_id, amount, reason, status, opened_at, closed_at)
		    VALUES ($1, 'psp', $2, $3, $4, $5, $6, $7)
		    ON CONFLICT (provider, dispute_id) DO UPDATE
		       SET status = excluded.status, closed_at = excluded.closed_at
		     WHERE order_disputes.status = 'open'
		    RETURNING order_id, dispute_id, amount, reason, status, xmax = 0 AS inserted
		), o AS (
		    UPDATE orders
		       SET status = CASE WHEN $5 = 'open' THEN 'disputed'
		                         WHEN refunded_amount >= captured_amount THEN 'refunded'
		                         WHEN refunded_amount > 0 THEN 'partially_refunded' ELSE 'paid' END,
		           updated_at = $8
		     WHERE id = $1 AND status IN `+checkout.ChargedStatuses.SQL()+`
		    RETURNING id, client_id, public_id, status, amount, currency
		), new_events (client_id, type, order_id, payload, created_at) AS (
		    -- order.disputed once per dispute: when it is first recorded open. A redelivery,
		    -- or the dispute's decision, writes none.
		    SELECT o.client_id, `+outbox.TypeSQL(outbox.OrderDisputed)+`, o.id, `+checkout.OrderPayloadSQL+` || jsonb_build_object(
		               'dispute', jsonb_build_object('id', d.dispute_id, 'amount', d.amount, 'reason', d.reason, 'status', d.status)), $8
		      FROM d JOIN o ON o.id = d.order_id
		     WHERE d.inserted AND d.status = 'open' AND o.status = 'disputed'
		)`+outbox.InsertSQL,
		orderID, d.ID, d.Amount, d.Reason, d.Status, d.Created, closed, s.cfg.Now())
	if err != nil {
		return fmt.Errorf("dispute %s of order %d: %w", d.ID, orderID, err)
	}
	return nil
}

// advanceProviderCharge moves the charge's known state to c if c is newer than what was
// applied; it reports whether it did. The upsert locks the charge's row, so two events of
// one charge applied at once are decided one after the other, on the committed state.
func advanceProviderCharge(ctx context.Context, tx *sqlx.Tx, provider string, c providerCharge, now time.Time) (bool, error) {
	var moved []bool
	if err := tx.SelectContext(ctx, &moved, `
		INSERT INTO provider_charges (provider, charge_id, charge_key, last_sequence, status, amount, currency,
		                              refunded, disputed, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (provider, charge_id) DO UPDATE
		   SET last_sequence = excluded.last_sequence, status = excluded.status, amount = excluded.amount,
		       currency = excluded.currency, refunded = excluded.refunded, disputed = excluded.disputed,
		       updated_at = excluded.updated_at
		 WHERE provider_charges.last_sequence < excluded.last_sequence
		RETURNING true`,
		provider, c.ID, c.Key, c.Sequence, c.Status, c.Amount, c.Currency, c.Refunded, c.Disputed, now); err != nil {
		return false, fmt.Errorf("advance charge %s: %w", c.ID, err)
	}
	return len(moved) == 1, nil
}
