package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
)

// What the provider inbox (checkout/inbox) needs of the order path: how a charge names its
// order, settling an order from its charge's newest state, and recording the refunds made
// at the provider. The inbox imports checkout, never the other way round; these are the
// order path's own rules, exported so that the inbox uses them rather than a copy.

// chargeDescription is what tekrar gives the provider with a charge, and the provider
// echoes in its events: the order it is for.
func chargeDescription(orderID int64) string { return "order " + strconv.FormatInt(orderID, 10) }

// OrderOfDescription reads chargeDescription ("order 12") back: the order a charge's
// description names, and false when it names none.
func OrderOfDescription(d string) (int64, bool) {
	n, ok := strings.CutPrefix(d, "order ")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(n, 10, 64)
	return id, err == nil && id > 0
}

// OrderPayloadSQL is the data every order event starts with, from a row o of orders, for a
// statement outside this package that writes an order event (the inbox's order.disputed).
const OrderPayloadSQL = orderPayloadSQL

// SettleProviderCharge makes order orderID, not paid yet, agree with ch, the newest state of
// a charge whose description names it, inside tx (the inbox's transaction). It reports
// whether the charge is the order's: its key is the key tekrar derives from the order's key
// (providerKey). A charge of an order that has a payment already (another charge's), or of
// no key, or under another key, is not tekrar's to settle (reconciliation's job) and is left
// alone.
//
//   - A charge that succeeded or was declined while the order's key is still in progress
//     (the worker's answer was lost, or it is still waiting for it) settles the order as the
//     worker would have, with the key's response stored, so that the next retry replays it.
//     The key row is locked first: the worker, a client's retry or the completer finishing
//     at the same moment either committed before (the key is completed: nothing to do) or
//     finds the key completed and is fenced.
//   - A succeeded charge of an order canceled without a fence makes the refund owed due now.
func (s *Service) SettleProviderCharge(ctx context.Context, tx *sqlx.Tx, orderID int64, ch psp.Charge) (ours bool, err error) {
	var paid bool
	if err := tx.GetContext(ctx, &paid, `SELECT EXISTS (SELECT 1 FROM payments WHERE order_id = $1)`, orderID); err != nil {
		return false, fmt.Errorf("payment of order %d: %w", orderID, err)
	}
	if paid {
		return false, nil // another charge's order
	}
	var k Key
	err = tx.GetContext(ctx, &k, `SELECT `+keyed.Columns+` FROM idempotency_keys WHERE order_id = $1 FOR UPDATE`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock the key of order %d: %w", orderID, err)
	}
	pk := providerKey("charge", &k)
	if pk != ch.Key {
		return false, nil
	}
	switch {
	case k.State == StateInProgress && (ch.Status == psp.StatusSucceeded || ch.Status == psp.StatusDeclined):
		if _, err := s.settleCharge(ctx, tx, &k, ch, pk); err != nil {
			return false, fmt.Errorf("settle order %d from the provider's event: %w", orderID, err)
		}
	case ch.Status == psp.StatusSucceeded:
		if _, err := tx.ExecContext(ctx, `
			UPDATE compensations SET next_attempt_at = least(next_attempt_at, $2), charge_id = coalesce(charge_id, $3)
			 WHERE order_id = $1 AND state IN `+compensationOpenSQL, orderID, s.cfg.Now(), ch.ID); err != nil {
			return false, fmt.Errorf("compensation of order %d: %w", orderID, err)
		}
	}
	return true, nil
}

// RecordProviderRefunds records on order orderID, inside tx, the refunds its charge had at
// the provider beyond what the order counts, when the provider says the charge is refunded
// refunded in all (providerRefundsSQL: by totals, so once whoever reports it). by names who
// reported it (unique per report), now is the time.
func RecordProviderRefunds(ctx context.Context, tx *sqlx.Tx, orderID, refunded int64, by string, now time.Time) error {
	_, err := tx.ExecContext(ctx, providerRefundsSQL, orderID, refunded, by, now)
	return err
}
