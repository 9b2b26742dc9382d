package operator

import (
	"context"
	"errors"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
)

// Recorder writes the record of an operator action (the console's audit log) in tx, the
// transaction that makes the action's effect. An error rolls the effect back: an action is
// never done without its record. detail describes what was done.
type Recorder func(ctx context.Context, tx *sqlx.Tx, detail map[string]any) error

// Actions are the operator's actions, on the keys and orders of s, whose database is db.
type Actions struct {
	db *sqlx.DB
	s  *checkout.Service
}

// New returns the actions of an operator on s, whose database is db.
func New(db *sqlx.DB, s *checkout.Service) *Actions { return &Actions{db: db, s: s} }

// ActionResult is what an operator action on a key did.
type ActionResult struct {
	// Done is false when nothing was changed: there was nothing to do (the key was already
	// released or expired), or the provider still could not say what happened.
	Done bool
	// Outcome says what happened in a word (the Outcome* constants).
	Outcome string
	// State is the key's state afterwards.
	State string
	// Detail is what was handed to the Recorder; when nothing was done, why.
	Detail map[string]any
}

// Outcomes of operator actions on keys.
const (
	OutcomePaid            = "paid"             // release: the provider had the charge, and it succeeded
	OutcomeDeclined        = "declined"         // release: the provider had the charge, and it was declined
	OutcomeCanceled        = "canceled"         // release: the provider had no charge; the order is canceled
	OutcomeRefunded        = "refunded"         // release: the refund is finished
	OutcomeRefundRefused   = "refund_refused"   // release: the provider refused the refund for good; it failed, the key answers the refusal
	OutcomeStillUnknown    = "still_unknown"    // release: the provider still cannot answer; nothing changed
	OutcomeProviderRefused = "provider_refused" // release: the provider refused outright; nothing changed
	OutcomeNotNeeded       = "not_needed"       // release: the key does not need attention; nothing changed
	OutcomeExpired         = "expired"          // expire: the key now expires
	OutcomeAlreadyExpired  = "already_expired"  // expire: the key had expired already; nothing changed
)

// ErrKeyBusy refuses to expire a key whose request is not finished: an in-progress key is
// work in flight (a worker, a retry or the completer may be charging for it right now), and
// a key needing attention has an outcome nobody knows yet. Expiring either would let a
// late retry be refused while its payment is still being decided.
var ErrKeyBusy = errors.New("the key's request is not finished")
