package keyed

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	tdb "github.com/tekrar/tekrar/internal/db"
)

// SetState is the parameters of SetStateSQL, the one fenced write of a key: what the
// worker that holds the key (its ID and lease token) leaves it in. It is made by one
// constructor per outcome, never by hand. A statement that splices SetStateSQL embeds it
// in its own parameters; Now is its :now as well.
type SetState struct {
	KeyID      int64        `db:"key_id"`
	LeaseToken int64        `db:"lease_token"`
	State      string       `db:"state"`
	Lease      sql.NullTime `db:"lease_expires_at"`
	Status     int          `db:"response_status"`
	Headers    string       `db:"response_headers"` // JSON, as text; "" for none
	Body       []byte       `db:"response_body"`
	Reason     string       `db:"attention_reason"`
	Now        time.Time    `db:"now"`
	// Card is the identity of the request's card as the charge's answer gave it (WithCard),
	// stored on the key with its outcome; NULL leaves the key's as it is.
	Card sql.NullString `db:"card_fingerprint"`
}

// WithCard is p storing card, the card identity a charge's answer carried ("" for none:
// the key's stays as it is). A first arrival claims its key without its card
// (docs/fingerprints.md): the charge says which card it was.
func (p SetState) WithCard(card string) SetState {
	p.Card = sql.NullString{String: card, Valid: card != "" && len(card) <= maxCardFingerprint}
	return p
}

// Complete stores the key's final answer at now and ends its lease.
func Complete(k *Key, r Response, now time.Time) (SetState, error) {
	headers, err := json.Marshal(r.Header)
	if err != nil {
		return SetState{}, fmt.Errorf("encode headers: %w", err)
	}
	return SetState{KeyID: k.ID, LeaseToken: k.LeaseToken, State: StateCompleted, Status: r.Status,
		Headers: string(headers), Body: r.Body, Now: now}, nil
}

// Release ends the lease at now so that the client's retry can resume at once instead of
// waiting for the lease to lapse: after an unknown provider outcome the work is not done,
// but nobody is doing it.
func Release(k *Key, now time.Time) SetState {
	return SetState{KeyID: k.ID, LeaseToken: k.LeaseToken, State: StateInProgress,
		Lease: sql.NullTime{Time: now, Valid: true}, Now: now}
}

// Extend moves the lease of a key this worker holds to until.
func Extend(k *Key, until time.Time) SetState {
	return SetState{KeyID: k.ID, LeaseToken: k.LeaseToken, State: StateInProgress,
		Lease: sql.NullTime{Time: until, Valid: true}}
}

// NeedsAttention hands the key to an operator, saying why; nobody holds it after.
func NeedsAttention(k *Key, reason string) SetState {
	return SetState{KeyID: k.ID, LeaseToken: k.LeaseToken, State: StateNeedsAttention, Reason: reason}
}

// maxCardFingerprint is the longest card identity a key stores (the domain
// card_fingerprint, migrations/00031_fingerprint_scope.sql); a longer one is not kept.
const maxCardFingerprint = 255

var setStateSQL = tdb.Named[SetState](SetStateSQL)

// SetStateIfInProgress runs SetStateSQL alone. It reports whether the key was still this
// worker's: false, with no error, when the key was taken over or finished meanwhile and
// nothing was written.
func SetStateIfInProgress(ctx context.Context, db sqlx.ExecerContext, p SetState) (bool, error) {
	res, err := setStateSQL.Exec(ctx, db, p)
	if err != nil {
		return false, fmt.Errorf("set key %d %s: %w", p.KeyID, p.State, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("set key %d %s: %w", p.KeyID, p.State, err)
	}
	return n > 0, nil
}
