package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
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
// echoes in its events: the order it is for, by its public id ("order ord_…"). Never by
// its internal id: that comes from a sequence, and after a failover or a restore the
// surviving database hands a lost order's id to another order, so a charge named by it
// could be matched to an order it was never for (docs/recovery.md, "What the provider is
// told").
func chargeDescription(publicID string) string { return "order " + publicID }

// OrderOfDescription reads a charge's description back: the order it names, and false when
// it names none. It has two forms:
//
//   - "order ord_…", chargeDescription's: the order's public id (ref.PublicID), random and
//     never reused;
//   - "order 12", of charges made before descriptions named public ids: the order's internal
//     id (ref.ID), digits, which may name another order now (FindChargeOrder confirms it by
//     the charge's key).
func OrderOfDescription(d string) (ref OrderRef, ok bool) {
	n, ok := strings.CutPrefix(d, "order ")
	if !ok {
		return ref, false
	}
	if publicOrderID.MatchString(n) {
		return OrderRef{PublicID: n}, true
	}
	id, err := strconv.ParseInt(n, 10, 64)
	if err != nil || id <= 0 {
		return ref, false
	}
	return OrderRef{ID: id}, true
}

// publicOrderID is the shape of an order's public id (the domain order_public_id,
// migrations/00013_public_ids.sql): checked before the id is looked up, so that a
// description of another shape finds nothing rather than fail the domain's check.
var publicOrderID = regexp.MustCompile(`^ord_[0-9a-f]{32}$`)

// OrderRef is the order a charge's description names: by its public id, or, in a
// description made before those, by its internal id. Exactly one is set.
type OrderRef struct {
	PublicID string
	ID       int64
}

// FindChargeOrder finds the order a provider's charge was made for from its description and
// its provider key, and false when the description names no order of tekrar's.
//
// A public id names one order for good. An internal id (a charge made before descriptions
// named public ids) is trusted only when the charge's key is the one tekrar derives from
// the key that created the order (ChargeKey): after a failover or a restore the same id may
// be another order's, which the charge must never touch. An order whose key row is gone
// cannot confirm it, and is not found.
func FindChargeOrder(ctx context.Context, db sqlx.QueryerContext, description, chargeKey string) (orderID int64, ok bool, err error) {
	ref, ok := OrderOfDescription(description)
	switch {
	case !ok:
		return 0, false, nil
	case ref.PublicID != "":
		err = sqlx.GetContext(ctx, db, &orderID, `SELECT id FROM orders WHERE public_id = $1`, ref.PublicID)
	default:
		var k Key
		err = sqlx.GetContext(ctx, db, &k, `SELECT `+keyed.Columns+` FROM idempotency_keys WHERE order_id = $1`, ref.ID)
		if err == nil && ChargeKey(&k) == chargeKey {
			orderID = ref.ID
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("order of charge %q: %w", description, err)
	}
	return orderID, orderID != 0, nil
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
// reported it (unique per report), now is the time. rf is the provider's refund the report
// is of (a refund.succeeded event's), nil when it names none: a refund recorded for it alone
// keeps its id, which the console shows.
func RecordProviderRefunds(ctx context.Context, tx *sqlx.Tx, orderID, refunded int64, by string, rf *psp.Refund, now time.Time) error {
	var id, amount any
	if rf != nil && rf.ID != "" {
		id, amount = rf.ID, rf.Amount
	}
	_, err := tx.ExecContext(ctx, providerRefundsSQL, orderID, refunded, by, now, id, amount)
	return err
}
