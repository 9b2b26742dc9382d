package checkout

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
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
type ProviderEvent struct {
	Provider string
	ID       string
	Type     string
	Body     []byte // as received: stored for the console and for replaying the inbox
	// Charge is the state of the charge after the event; nil for an event about no charge.
	Charge *ProviderCharge
}

// ProviderCharge is a charge as the provider's newest event describes it.
type ProviderCharge struct {
	ID       string
	Key      string // the provider-side key tekrar charged under
	Sequence int
	Status   string
	Amount   int64
	Currency string
	Refunded int64
	Disputed bool
}

// Inbox outcomes: what receiving one delivery did.
const (
	InboxApplied   = "applied"   // the newest state of its charge: applied
	InboxStale     = "stale"     // a newer event of the charge was applied first: stored, changes nothing
	InboxIgnored   = "ignored"   // a type tekrar does not act on: stored and acknowledged
	InboxDuplicate = "duplicate" // delivered before: counted, changes nothing
)

// knownProviderEvents are the event types the inbox applies.
var knownProviderEvents = map[string]bool{
	"charge.succeeded": true, "charge.failed": true, "charge.refunded": true,
	"refund.succeeded": true, "dispute.created": true, "dispute.closed": true,
}

// ReceiveProviderEvent records e and applies it, in one transaction.
func (s *Service) ReceiveProviderEvent(ctx context.Context, e ProviderEvent) (outcome string, err error) {
	now := s.cfg.Now()
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("receive provider event: %w", err)
	}
	defer tx.Rollback()
	err = func() error {
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
			return fmt.Errorf("record: %w", err)
		}
		switch {
		case !inserted:
			outcome = InboxDuplicate
			return nil
		case e.Charge == nil || !knownProviderEvents[e.Type]:
			outcome = InboxIgnored
			return nil
		}
		applied, err := advanceProviderCharge(ctx, tx, e.Provider, *e.Charge, now)
		if err != nil {
			return err
		}
		outcome = InboxStale
		if applied {
			outcome = InboxApplied
		}
		if _, err := tx.ExecContext(ctx, `UPDATE provider_events SET outcome = $3 WHERE provider = $1 AND event_id = $2`,
			e.Provider, e.ID, outcome); err != nil {
			return fmt.Errorf("record outcome: %w", err)
		}
		return nil
	}()
	if err != nil {
		return "", fmt.Errorf("receive provider event %s: %w", e.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("receive provider event %s: commit: %w", e.ID, err)
	}
	return outcome, nil
}

// advanceProviderCharge moves the charge's known state to c if c is newer than what was
// applied; it reports whether it did. The upsert locks the charge's row, so two events of
// one charge applied at once are decided one after the other, on the committed state.
func advanceProviderCharge(ctx context.Context, tx *sqlx.Tx, provider string, c ProviderCharge, now time.Time) (bool, error) {
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
