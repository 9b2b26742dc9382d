// Package clients owns the API clients of checkout: the apps and POS fleets that call /v1.
// A client is the scope of every idempotency key, order and refund.
package clients

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// SecretPrefix starts every client secret, so that secret scanners and humans recognise one
// in a log or a paste.
const SecretPrefix = "tekrar_sk_"

// Client is an authenticated API client.
type Client struct {
	ID     int64         `db:"id"`
	Name   string        `db:"name"`
	KeyTTL time.Duration `db:"-"`
}

// ErrUnknown is a secret that matches no active client.
var ErrUnknown = errors.New("unknown client secret")

// NewSecret returns a fresh secret: the prefix and 256 random bits.
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's RNG does not fail
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Hash is what the database stores of a secret.
func Hash(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// Create stores a new client with the hash of secret and returns it.
func Create(ctx context.Context, db sqlx.ExtContext, name, secret string) (Client, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return Client{}, errors.New("create client: name must be 1 to 200 characters")
	}
	h := Hash(secret)
	var c Client
	err := sqlx.GetContext(ctx, db, &c,
		`INSERT INTO clients (name, secret_hash) VALUES ($1, $2) RETURNING id, name`, name, h[:])
	if err != nil {
		return Client{}, fmt.Errorf("create client: %w", err)
	}
	c.KeyTTL = 24 * time.Hour
	return c, nil
}

// CreateIfAbsent stores a client with a known secret unless one with that secret exists:
// how `tekrar dev` seeds its demo client on every start.
func CreateIfAbsent(ctx context.Context, db sqlx.ExtContext, name, secret string) error {
	h := Hash(secret)
	_, err := db.ExecContext(ctx,
		`INSERT INTO clients (name, secret_hash) VALUES ($1, $2) ON CONFLICT (secret_hash) DO NOTHING`, name, h[:])
	if err != nil {
		return fmt.Errorf("seed client: %w", err)
	}
	return nil
}

// lookup finds the active client whose secret hashes to h.
func lookup(ctx context.Context, db sqlx.QueryerContext, h [32]byte) (Client, error) {
	var row struct {
		ID        int64  `db:"id"`
		Name      string `db:"name"`
		TTLMicros int64  `db:"ttl_us"`
	}
	err := sqlx.GetContext(ctx, db, &row, `
		SELECT id, name, (extract(epoch FROM key_ttl) * 1000000)::bigint AS ttl_us
		  FROM clients
		 WHERE secret_hash = $1 AND disabled_at IS NULL`, h[:])
	if errors.Is(err, sql.ErrNoRows) {
		return Client{}, ErrUnknown
	}
	if err != nil {
		return Client{}, fmt.Errorf("look up client: %w", err)
	}
	return Client{ID: row.ID, Name: row.Name, KeyTTL: time.Duration(row.TTLMicros) * time.Microsecond}, nil
}
