package report

// The console's read of one key: its row or tombstone, stored response, order and refunds.
// See report.go for the conventions (parameters only, index-backed, no whole scans).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
)

// KeyDetail is everything about one key: the row, its stored response, what it made, and
// its tombstone once the sweeper has expired it.
type KeyDetail struct {
	KeyRow
	Fingerprint     string // hex SHA-256 of the first request (see FingerprintAlgorithm)
	LeaseToken      int64
	LeaseExpiresAt  *time.Time
	AttentionReason string
	CompletedAt     *time.Time
	// The stored response, replayed byte for byte to repeats; empty until completed.
	ResponseHeaders map[string]string
	ResponseBody    []byte
	// Tombstone is set once the key was expired. Without a key row (ID 0) the key is
	// swept: State is KeyStateExpired and the fields of KeyRow come from the tombstone.
	Tombstone *Tombstone
	// Order is the key's order, or the order its refund refunds; Refunds are that order's.
	Order   *OrderRow
	Refunds []RefundRow
}

// Tombstone is what stays of a swept key for its client's grace period: a retry with the
// key is refused until ForgetAt, after which the key is new again.
type Tombstone struct {
	KeyID     *int64    // the key row, until the sweeper deletes it
	FirstSeen time.Time // the key's first arrival
	ExpiredAt time.Time
	ForgetAt  time.Time
	CreatedAt time.Time // when the sweeper wrote it
}

// RefundRow is a refund of an order, with the key that asked for it.
type RefundRow struct {
	ID               int64     `db:"id"`
	PublicID         string    `db:"public_id"` // what the console shows
	OrderID          int64     `db:"order_id"`
	Amount           int64     `db:"amount"`
	Currency         string    `db:"currency"`
	Status           string    `db:"status"`
	Reason           string    `db:"reason"`
	ProviderRefundID string    `db:"provider_refund_id"`
	CreatedAt        time.Time `db:"created_at"`
	UpdatedAt        time.Time `db:"updated_at"`
	Key              string    `db:"key"` // empty once the key is forgotten
}

const getKeySQL = `
	SELECT k.id, k.client_id, c.name AS client_name, k.key, k.state, k.recovery_point, k.method,
	       k.path, k.order_id, k.refund_id, r.order_id AS refund_order_id,
	       (SELECT o.public_id FROM orders o WHERE o.id = coalesce(k.order_id, r.order_id)) AS order_public_id,
	       k.response_status, k.created_at, k.expires_at,
	       (SELECT count(*) FROM key_events e
	         WHERE e.client_id = k.client_id AND e.key = k.key AND e.key_id = k.id
	           AND e.kind = 'replayed') AS replays,
	       encode(k.fingerprint, 'hex') AS fingerprint, k.lease_token, k.lease_expires_at,
	       coalesce(k.attention_reason, '') AS attention_reason, k.completed_at,
	       k.response_headers::text AS response_headers, k.response_body
	  FROM idempotency_keys k
	  JOIN clients c ON c.id = k.client_id
	  LEFT JOIN refunds r ON r.id = k.refund_id
	 WHERE k.client_id = $1 AND k.key = $2`

// getTombstoneSQL counts the replays of every incarnation of the key: the swept row's id is
// gone from the tombstone once the row is deleted.
const getTombstoneSQL = `
	SELECT t.client_id, c.name AS client_name, t.key, t.key_id, encode(t.fingerprint, 'hex') AS fingerprint,
	       t.method, t.path, t.order_id, t.refund_id, r.order_id AS refund_order_id,
	       (SELECT o.public_id FROM orders o WHERE o.id = coalesce(t.order_id, r.order_id)) AS order_public_id,
	       t.first_seen, t.expired_at, t.forget_at, t.created_at,
	       (SELECT count(*) FROM key_events e
	         WHERE e.client_id = t.client_id AND e.key = t.key AND e.kind = 'replayed') AS replays
	  FROM key_tombstones t
	  JOIN clients c ON c.id = t.client_id
	  LEFT JOIN refunds r ON r.id = t.refund_id
	 WHERE t.client_id = $1 AND t.key = $2`

const orderRefundsSQL = `
	SELECT r.id, r.public_id, r.order_id, r.amount, r.currency, r.status, coalesce(r.reason, '') AS reason,
	       coalesce(r.provider_refund_id, '') AS provider_refund_id, r.created_at, r.updated_at,
	       coalesce((SELECT k.key FROM idempotency_keys k WHERE k.refund_id = r.id),
	                (SELECT t.key FROM key_tombstones t WHERE t.refund_id = r.id LIMIT 1), '') AS key
	  FROM refunds r
	 WHERE r.order_id = $1
	 ORDER BY r.id`

type keyDetailRow struct {
	KeyRow
	Fingerprint     string       `db:"fingerprint"`
	LeaseToken      int64        `db:"lease_token"`
	LeaseExpiresAt  sql.NullTime `db:"lease_expires_at"`
	AttentionReason string       `db:"attention_reason"`
	CompletedAt     sql.NullTime `db:"completed_at"`
	ResponseHeaders *string      `db:"response_headers"`
	ResponseBody    []byte       `db:"response_body"`
}

type tombstoneRow struct {
	ClientID      int64     `db:"client_id"`
	ClientName    string    `db:"client_name"`
	Key           string    `db:"key"`
	KeyID         *int64    `db:"key_id"`
	Fingerprint   string    `db:"fingerprint"`
	Method        string    `db:"method"`
	Path          string    `db:"path"`
	OrderID       *int64    `db:"order_id"`
	RefundID      *int64    `db:"refund_id"`
	RefundOrderID *int64    `db:"refund_order_id"`
	OrderPublicID *string   `db:"order_public_id"`
	FirstSeen     time.Time `db:"first_seen"`
	ExpiredAt     time.Time `db:"expired_at"`
	ForgetAt      time.Time `db:"forget_at"`
	CreatedAt     time.Time `db:"created_at"`
	Replays       int64     `db:"replays"`
}

// GetKey returns everything about one key of a client: the live row, or, once the sweeper
// removed it, its tombstone (State KeyStateExpired). ErrKeyNotFound: neither exists.
func GetKey(ctx context.Context, db sqlx.QueryerContext, clientID int64, key string) (KeyDetail, error) {
	var d KeyDetail
	var row keyDetailRow
	err := sqlx.GetContext(ctx, db, &row, getKeySQL, clientID, key)
	live := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return KeyDetail{}, fmt.Errorf("get key: %w", err)
	}
	var t tombstoneRow
	err = sqlx.GetContext(ctx, db, &t, getTombstoneSQL, clientID, key)
	dead := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return KeyDetail{}, fmt.Errorf("get key tombstone: %w", err)
	}
	switch {
	case live:
		d = KeyDetail{KeyRow: row.KeyRow, Fingerprint: row.Fingerprint, LeaseToken: row.LeaseToken,
			AttentionReason: row.AttentionReason, ResponseBody: row.ResponseBody}
		d.CreatedAt, d.ExpiresAt = d.CreatedAt.UTC(), d.ExpiresAt.UTC()
		if row.LeaseExpiresAt.Valid {
			at := row.LeaseExpiresAt.Time.UTC()
			d.LeaseExpiresAt = &at
		}
		if row.CompletedAt.Valid {
			at := row.CompletedAt.Time.UTC()
			d.CompletedAt = &at
		}
		if row.ResponseHeaders != nil {
			if err := json.Unmarshal([]byte(*row.ResponseHeaders), &d.ResponseHeaders); err != nil {
				return KeyDetail{}, fmt.Errorf("stored response headers of key %d: %w", row.ID, err)
			}
		}
		// A tombstone of an earlier incarnation of the key (forgotten, then used again) is
		// not this row's.
		if dead && t.KeyID != nil && *t.KeyID == row.ID {
			d.Tombstone = t.tombstone()
		}
	case dead:
		d = KeyDetail{KeyRow: KeyRow{ClientID: t.ClientID, ClientName: t.ClientName, Key: t.Key,
			State: checkout.KeyStateExpired, RecoveryPoint: checkout.PointFinished, Method: t.Method, Path: t.Path,
			OrderID: t.OrderID, RefundID: t.RefundID, RefundOrderID: t.RefundOrderID, OrderPublicID: t.OrderPublicID,
			CreatedAt: t.FirstSeen.UTC(), ExpiresAt: t.ExpiredAt.UTC(), Replays: t.Replays},
			Fingerprint: t.Fingerprint, Tombstone: t.tombstone()}
	default:
		return KeyDetail{}, checkout.ErrKeyNotFound
	}
	orderID := d.OrderID
	if orderID == nil {
		orderID = d.RefundOrderID
	}
	if orderID == nil {
		return d, nil
	}
	orders, err := loadOrderRows(ctx, db, []int64{*orderID})
	if err != nil {
		return KeyDetail{}, err
	}
	if len(orders) == 1 {
		d.Order = &orders[0]
	}
	if err := sqlx.SelectContext(ctx, db, &d.Refunds, orderRefundsSQL, *orderID); err != nil {
		return KeyDetail{}, fmt.Errorf("get key: refunds: %w", err)
	}
	for i := range d.Refunds {
		d.Refunds[i].CreatedAt, d.Refunds[i].UpdatedAt = d.Refunds[i].CreatedAt.UTC(), d.Refunds[i].UpdatedAt.UTC()
	}
	return d, nil
}

func (t *tombstoneRow) tombstone() *Tombstone {
	return &Tombstone{KeyID: t.KeyID, FirstSeen: t.FirstSeen.UTC(), ExpiredAt: t.ExpiredAt.UTC(),
		ForgetAt: t.ForgetAt.UTC(), CreatedAt: t.CreatedAt.UTC()}
}
