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
	_ "time/tzdata" // a client's zone must load where the host has no zoneinfo

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/mailbox"
)

// SecretPrefix starts every client secret, so that secret scanners and humans recognise one
// in a log or a paste.
const SecretPrefix = "tekrar_sk_"

// Client is an authenticated API client.
type Client struct {
	ID     int64         `db:"id"`
	Name   string        `db:"name"`
	KeyTTL time.Duration `db:"-"`
	// ProviderCustomerPrefix starts the provider's name of each of the client's customers
	// (ProviderCustomer). It is the client's own stored value, chosen at random when the
	// client is created (migration 00040), never derived from its id: an id can be handed to
	// another client after a failover that lost the client, a prefix cannot.
	ProviderCustomerPrefix string `db:"provider_customer_prefix"`
}

// ProviderCustomer is the provider's customer id for the client's customer: the client's
// prefix and the customer, "cl_3f9a…_cus_1". A client's backend saves its customers' cards at
// the provider under this id (GET /v1/client says the prefix). The prefix ends in the only
// "_" it holds after "cl_", so no two (client, customer) pairs share one.
func (c Client) ProviderCustomer(customer string) string { return c.ProviderCustomerPrefix + customer }

// Settings are a client's idempotency settings.
type Settings struct {
	// KeyTTL is how long a key is honoured (replayed) after its first arrival.
	KeyTTL time.Duration
	// TombstoneGrace is how long, after a key expires, a retry with it is still refused
	// (422 idempotency_key_expired) before the key is forgotten and may be used anew.
	TombstoneGrace time.Duration
	// TimeZone is the IANA zone of the client's business day (Europe/Istanbul): scheduled
	// work keyed by a day (due dates, settlements) reads the day there.
	TimeZone string
	// ContactEmail is where tekrar writes to the client's people when one of its webhook
	// endpoints is disabled (docs/webhooks-out.md); empty: nobody is written to.
	ContactEmail string
}

// Bounds of the settings; the database checks the same.
const (
	MinKeyTTL         = time.Minute
	MaxKeyTTL         = 90 * 24 * time.Hour
	MinTombstoneGrace = time.Hour
	MaxTombstoneGrace = 365 * 24 * time.Hour
)

// DefaultSettings are what a client gets unless told otherwise.
var DefaultSettings = Settings{KeyTTL: 24 * time.Hour, TombstoneGrace: 30 * 24 * time.Hour, TimeZone: "UTC"}

// Validate refuses settings out of bounds, with a message naming the setting.
func (s Settings) Validate() error {
	if s.KeyTTL < MinKeyTTL || s.KeyTTL > MaxKeyTTL {
		return fmt.Errorf("key TTL %s is out of range: it must be between 1 minute and 90 days", s.KeyTTL)
	}
	if s.TombstoneGrace < MinTombstoneGrace || s.TombstoneGrace > MaxTombstoneGrace {
		return fmt.Errorf("tombstone grace %s is out of range: it must be between 1 hour and 365 days", s.TombstoneGrace)
	}
	if _, err := Location(s.TimeZone); err != nil {
		return err
	}
	if s.ContactEmail != "" {
		if err := CheckContactEmail(s.ContactEmail); err != nil {
			return err
		}
	}
	return nil
}

// CheckContactEmail accepts one ordinary mailbox address, by the same check as a receipt's
// (mailbox.Check): no address literal ([10.0.0.1]), no single-label host such as localhost,
// no % routing, nothing a header could be split at.
func CheckContactEmail(s string) error {
	if err := mailbox.Check(s); err != nil {
		return fmt.Errorf("contact e-mail %q is not one plain address such as ops@shop.example: %w", s, err)
	}
	return nil
}

// Location loads a client's time zone. Only IANA names are accepted ("Local" and the empty
// name are refused: the server's own zone is no client's business day).
func Location(name string) (*time.Location, error) {
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, fmt.Errorf("time zone %q is not an IANA zone name such as Europe/Istanbul", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q is not an IANA zone name such as Europe/Istanbul", name)
	}
	return loc, nil
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

// Create stores a new client with the hash of secret and the default settings.
func Create(ctx context.Context, db sqlx.ExtContext, name, secret string) (Client, error) {
	return CreateWith(ctx, db, name, secret, DefaultSettings)
}

// CheckName refuses a client name CreateWith would refuse, so that a command can say so
// before it connects.
func CheckName(name string) error {
	if name = strings.TrimSpace(name); name == "" || len(name) > 200 {
		return errors.New("create client: name must be 1 to 200 characters")
	}
	return nil
}

// CreateWith stores a new client with the hash of secret and returns it.
func CreateWith(ctx context.Context, db sqlx.ExtContext, name, secret string, set Settings) (Client, error) {
	if err := CheckName(name); err != nil {
		return Client{}, err
	}
	name = strings.TrimSpace(name)
	if err := set.Validate(); err != nil {
		return Client{}, err
	}
	h := Hash(secret)
	var c Client
	err := sqlx.GetContext(ctx, db, &c, `
		INSERT INTO clients (name, secret_hash, key_ttl, tombstone_grace, time_zone, contact_email)
		VALUES ($1, $2, make_interval(secs => $3), make_interval(secs => $4), $5, nullif($6, ''))
		RETURNING id, name, provider_customer_prefix`, name, h[:], set.KeyTTL.Seconds(), set.TombstoneGrace.Seconds(), set.TimeZone,
		set.ContactEmail)
	if err != nil {
		return Client{}, fmt.Errorf("create client: %w", err)
	}
	c.KeyTTL = set.KeyTTL
	return c, nil
}

// ErrNoClient is a client id that does not exist.
var ErrNoClient = errors.New("no such client")

// Update changes a client's settings. A serving process notices within its authentication
// cache TTL; keys already stored keep the expiry they were given.
func Update(ctx context.Context, db sqlx.ExtContext, id int64, set Settings) error {
	if err := set.Validate(); err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, `
		UPDATE clients SET key_ttl = make_interval(secs => $2), tombstone_grace = make_interval(secs => $3),
		       time_zone = $4, contact_email = nullif($5, '')
		 WHERE id = $1`, id, set.KeyTTL.Seconds(), set.TombstoneGrace.Seconds(), set.TimeZone, set.ContactEmail)
	if err != nil {
		return fmt.Errorf("update client: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoClient
	}
	return nil
}

// Get returns a client's settings.
func Get(ctx context.Context, db sqlx.QueryerContext, id int64) (Client, Settings, error) {
	var row struct {
		ID    int64   `db:"id"`
		Name  string  `db:"name"`
		TTL   float64 `db:"ttl"`
		Grace float64 `db:"grace"`
		Zone  string  `db:"time_zone"`
		Pre   string  `db:"provider_customer_prefix"`
		Email string  `db:"contact_email"`
	}
	err := sqlx.GetContext(ctx, db, &row, `
		SELECT id, name, extract(epoch FROM key_ttl)::float8 AS ttl, extract(epoch FROM tombstone_grace)::float8 AS grace,
		       time_zone, provider_customer_prefix, coalesce(contact_email, '') AS contact_email
		  FROM clients WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Client{}, Settings{}, ErrNoClient
	}
	if err != nil {
		return Client{}, Settings{}, fmt.Errorf("get client: %w", err)
	}
	set := Settings{KeyTTL: time.Duration(row.TTL * float64(time.Second)), TombstoneGrace: time.Duration(row.Grace * float64(time.Second)), TimeZone: row.Zone, ContactEmail: row.Email}
	return Client{ID: row.ID, Name: row.Name, KeyTTL: set.KeyTTL, ProviderCustomerPrefix: row.Pre}, set, nil
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
		Prefix    string `db:"provider_customer_prefix"`
	}
	err := sqlx.GetContext(ctx, db, &row, `
		SELECT id, name, (extract(epoch FROM key_ttl) * 1000000)::bigint AS ttl_us, provider_customer_prefix
		  FROM clients
		 WHERE secret_hash = $1 AND disabled_at IS NULL`, h[:])
	if errors.Is(err, sql.ErrNoRows) {
		return Client{}, ErrUnknown
	}
	if err != nil {
		return Client{}, fmt.Errorf("look up client: %w", err)
	}
	return Client{ID: row.ID, Name: row.Name, KeyTTL: time.Duration(row.TTLMicros) * time.Microsecond, ProviderCustomerPrefix: row.Prefix}, nil
}
