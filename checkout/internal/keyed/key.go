package keyed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Key states: the three a key row is in (its state column), and StateExpired.
const (
	StateInProgress     = "in_progress"
	StateCompleted      = "completed"
	StateNeedsAttention = "needs_attention"
	// StateExpired is the state the console reports for a key that the sweeper removed:
	// only its tombstone is left. A key row past its expires_at keeps its state (completed)
	// until it is swept; whether it is expired is Expired's to say, not its state's.
	StateExpired = "expired"
)

// Expired is the one rule of key expiry: a key whose retention ends at expiresAt is
// expired from that instant on, inclusive, so that a key the expire action ends "now" is
// refused at once. An expired key is never replayed nor run again: a retry with it is
// refused (422 idempotency_key_expired). Key.Expired applies it to a key, and every
// decision in Go goes through one of the two: the replay, the execution, the key status
// endpoint, the expire action and the console. SQL states the same rule as
// "expires_at <= now" (the sweeper's tombstone step); TestKeyExpiryBoundary checks every
// path at the boundary.
func Expired(expiresAt, now time.Time) bool { return !now.Before(expiresAt) }

// Expired reports whether the key is expired at now: its tombstone (the sweeper removed
// it) or a row past its expires_at (see the function Expired).
func (k *Key) Expired(now time.Time) bool { return k.Tombstone || Expired(k.ExpiresAt, now) }

// Key is a row of idempotency_keys.
type Key struct {
	ID              int64          `db:"id"`
	ClientID        int64          `db:"client_id"`
	Key             string         `db:"key"`
	Fingerprint     []byte         `db:"fingerprint"`
	Method          string         `db:"method"`
	Path            string         `db:"path"`
	State           string         `db:"state"`
	RecoveryPoint   string         `db:"recovery_point"`
	LeaseToken      int64          `db:"lease_token"`
	LeaseExpiresAt  sql.NullTime   `db:"lease_expires_at"`
	OrderID         sql.NullInt64  `db:"order_id"`
	RefundID        sql.NullInt64  `db:"refund_id"`
	ResponseStatus  sql.NullInt32  `db:"response_status"`
	ResponseHeaders []byte         `db:"response_headers"`
	ResponseBody    []byte         `db:"response_body"`
	AttentionReason sql.NullString `db:"attention_reason"`
	CreatedAt       time.Time      `db:"created_at"`
	ExpiresAt       time.Time      `db:"expires_at"`
	// Intent is what the key's provider keys derive from (checkout's providerKey); nil in a
	// row claimed before there was one, whose provider keys derive from its id, and in a
	// tombstone.
	Intent []byte `db:"intent"`
	// Tombstone marks what remains of a swept key (see key_tombstones): enough to refuse a
	// late retry, with ID 0 and no response.
	Tombstone bool `db:"tombstone"`
	// OrderPublicID and RefundPublicID are what clients and operators see of OrderID and
	// RefundID (orders.public_id, refunds.public_id; the integers are never shown). Not
	// columns of the key: the claims, TakeOver and TombstoneSQL read them with the key, and
	// PublicIDs reads them for a key that came from elsewhere. "" when not read.
	OrderPublicID  string `db:"order_public_id"`
	RefundPublicID string `db:"refund_public_id"`
	// ScopeFingerprint and CardFingerprint are what the claim stores of the request's
	// scope (scope.go). Not in Columns: they are read only when a request's exact
	// fingerprint differs from the key's. A claim stores no card (its charge's answer
	// does); a takeover by a re-tokenized retry of a key without one carries the retry's
	// card in CardFingerprint, for the run to store if its charge's answer names none.
	ScopeFingerprint []byte         `db:"-"`
	CardFingerprint  sql.NullString `db:"-"`
}

// PublicIDs reads the public ids of the key's order and refund when the statement that read
// the key did not: for the rare answers that name them from a key looked up (an expired
// key, an operator's release). The hot paths read them with the key instead.
func PublicIDs(ctx context.Context, db sqlx.QueryerContext, k *Key) error {
	if (!k.OrderID.Valid || k.OrderPublicID != "") && (!k.RefundID.Valid || k.RefundPublicID != "") {
		return nil
	}
	err := db.QueryRowxContext(ctx, `
		SELECT coalesce((SELECT public_id::text FROM orders WHERE id = $1), ''),
		       coalesce((SELECT public_id::text FROM refunds WHERE id = $2), '')`, k.OrderID, k.RefundID).
		Scan(&k.OrderPublicID, &k.RefundPublicID)
	if err != nil {
		return fmt.Errorf("public ids of key %d: %w", k.ID, err)
	}
	return nil
}

// Response is what a keyed request answers, stored with its key so that a repeat gets
// the same status, headers and bytes.
type Response struct {
	Status int
	Header map[string]string
	Body   []byte
}

// StoredResponse is the answer stored with a completed key.
func (k *Key) StoredResponse() (Response, error) {
	r := Response{Status: int(k.ResponseStatus.Int32), Body: k.ResponseBody}
	if len(k.ResponseHeaders) > 0 {
		var err error
		if r.Header, err = DecodeHeaders(k.ResponseHeaders); err != nil {
			return Response{}, fmt.Errorf("stored response headers of key %d: %w", k.ID, err)
		}
	}
	return r, nil
}

// Leased reports whether someone holds the key at now.
func (k *Key) Leased(now time.Time) bool {
	return k.LeaseExpiresAt.Valid && k.LeaseExpiresAt.Time.After(now)
}

// Get is the first query of a keyed request that is not a replay.
func Get(ctx context.Context, db sqlx.QueryerContext, clientID int64, key string) (*Key, error) {
	var k Key
	err := sqlx.GetContext(ctx, db, &k,
		`SELECT `+Columns+` FROM idempotency_keys WHERE client_id = $1 AND key = $2`, clientID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoKey
	}
	if err != nil {
		return nil, fmt.Errorf("look up key: %w", err)
	}
	return &k, nil
}

// getReplay reads only what a replay needs of a key, with a plain Scan: it is the one
// query of a replay, the hottest path there is, and the full row through reflection cost
// about a fifth of a replay's CPU. Everything that is not a replay goes on to Get.
func getReplay(ctx context.Context, db sqlx.QueryerContext, clientID int64, key string) (*Key, error) {
	k := Key{ClientID: clientID, Key: key}
	err := db.QueryRowxContext(ctx, `
		SELECT id, state, fingerprint, response_status, response_headers, response_body, expires_at
		  FROM idempotency_keys WHERE client_id = $1 AND key = $2`, clientID, key).
		Scan(&k.ID, &k.State, &k.Fingerprint, &k.ResponseStatus, &k.ResponseHeaders, &k.ResponseBody, &k.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoKey
	}
	if err != nil {
		return nil, fmt.Errorf("look up key for replay: %w", err)
	}
	return &k, nil
}

// TakeOver gives the key to a new worker when the previous one's lease has lapsed (it
// died, or gave the key back after an unknown provider outcome). Incrementing the token
// fences the former owner out: its completing write names the old token and matches
// nothing. It returns ErrNoKey if someone else took the key first.
func TakeOver(ctx context.Context, db sqlx.QueryerContext, k *Key, now time.Time, lease time.Duration) (*Key, error) {
	var nk Key
	err := sqlx.GetContext(ctx, db, &nk, `
		WITH k AS (
		    UPDATE idempotency_keys
		       SET lease_token = lease_token + 1, lease_expires_at = $3
		     WHERE id = $1 AND lease_token = $2 AND state = 'in_progress'
		       AND (lease_expires_at IS NULL OR lease_expires_at <= $4)
		    RETURNING `+Columns+`
		)
		SELECT k.*, coalesce(o.public_id::text, '') AS order_public_id,
		       coalesce(r.public_id::text, '') AS refund_public_id
		  FROM k LEFT JOIN orders o ON o.id = k.order_id LEFT JOIN refunds r ON r.id = k.refund_id`,
		k.ID, k.LeaseToken, now.Add(lease), now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoKey
	}
	if err != nil {
		return nil, fmt.Errorf("take over key: %w", err)
	}
	return &nk, nil
}

// Abandoned lists up to batch keys in progress whose lease lapsed before before (or that
// hold none), oldest first: the completer's work list, each to be taken over (TakeOver).
// "response_status IS NULL" (only unfinished keys lack a response) is what lets the small
// partial index of unfinished keys answer it (TestKeyWritesUseThePrimaryKey).
func Abandoned(ctx context.Context, db sqlx.QueryerContext, before time.Time, batch int) ([]Key, error) {
	var keys []Key
	err := sqlx.SelectContext(ctx, db, &keys, `
		SELECT `+Columns+` FROM idempotency_keys
		 WHERE state = 'in_progress' AND response_status IS NULL
		   AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
		 ORDER BY created_at
		 LIMIT $2`, before, batch)
	return keys, err
}

// Lock reads the client's key in tx and locks its row until tx ends, for the operator's
// expire action: the key's state cannot change between the check and the update (a
// completion in flight waits, or is seen). ErrNoKey if there is no such row.
func Lock(ctx context.Context, tx *sqlx.Tx, clientID int64, key string) (*Key, error) {
	var k Key
	err := tx.GetContext(ctx, &k, `
		SELECT `+Columns+` FROM idempotency_keys
		 WHERE client_id = $1 AND key = $2
		   FOR UPDATE`, clientID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoKey
	}
	if err != nil {
		return nil, fmt.Errorf("lock key: %w", err)
	}
	return &k, nil
}

// SetExpiry ends the retention of the key with id at at, in tx: the operator's expire
// action, on a key Lock locked, so that no lease token is needed to fence it (a completed
// key has no worker). The same statement notifies every process's replay cache (Cache),
// which forgets the key when tx commits.
func SetExpiry(ctx context.Context, tx *sqlx.Tx, id int64, at time.Time) error {
	if _, err := tx.ExecContext(ctx, setExpirySQL, id, at); err != nil {
		return fmt.Errorf("set expiry of key %d: %w", id, err)
	}
	return nil
}

// TakeFromAttention puts a key that needs attention back in progress under a new lease
// token, in tx, fenced by the token k was read with: the operator's release settles it
// next, fenced by the new token as every completion is. false when the key had left
// needs_attention (another release got there first).
func TakeFromAttention(ctx context.Context, tx *sqlx.Tx, k *Key) (bool, error) {
	err := tx.GetContext(ctx, &k.LeaseToken, `
		UPDATE idempotency_keys
		   SET state = 'in_progress', attention_reason = NULL, lease_token = lease_token + 1,
		       lease_expires_at = NULL
		 WHERE id = $1 AND lease_token = $2 AND state = 'needs_attention'
		RETURNING lease_token`, k.ID, k.LeaseToken)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k.State = StateInProgress
	return true, nil
}

// The two ways a key can be missing for its caller.
var (
	// ErrNoKey is a key that does not exist (or that another worker took first).
	ErrNoKey = errors.New("no such key")
	// ErrFenced means the key was taken over while this worker held it: the work continues
	// in the new owner's hands, and this worker's result must not be written.
	ErrFenced = errors.New("key was taken over by another worker")
)
