package deliveries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/riverqueue/river"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/db"
)

// MaxEndpoints bounds a client's endpoints: each event is sent to every one of them.
const MaxEndpoints = 20

// DefaultOverlap is how long a rotated-out secret keeps signing beside the new one, so that
// a receiver can switch to the new secret without refusing a delivery in between.
const DefaultOverlap = 24 * time.Hour

// MaxOverlap bounds a rotation's overlap.
const MaxOverlap = 7 * 24 * time.Hour

// Store keeps the clients' endpoints and their secrets.
type Store struct {
	DB     *sqlx.DB
	Sealer *Sealer // nil: no TEKRAR_SECRETS_KEY, endpoints cannot be created or rotated
	Policy Policy
	Now    func() time.Time
	// Jobs queues the jobs of a resend (Resend); nil: resends are refused with an error.
	Jobs *river.Client[*sql.Tx]
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Endpoint is a client's webhook endpoint as the client sees it.
type Endpoint struct {
	InternalID     int64          `db:"id" json:"-"`
	ID             string         `db:"public_id" json:"id"`
	ClientID       int64          `db:"client_id" json:"-"`
	URL            string         `db:"url" json:"url"`
	EventTypes     pq.StringArray `db:"event_types" json:"event_types"`
	CreatedAt      time.Time      `db:"created_at" json:"created_at"`
	Status         string         `db:"-" json:"status"` // enabled or disabled
	DisabledAt     *time.Time     `db:"disabled_at" json:"disabled_at,omitempty"`
	DisabledReason *string        `db:"disabled_reason" json:"disabled_reason,omitempty"`
	// RotatingUntil: a rotated-out secret still signs beside the current one until then.
	RotatingUntil *time.Time `db:"rotating_until" json:"previous_secret_expires_at,omitempty"`
	// Secret is set only in the answer that created it (creation, rotation): it is shown
	// once and never again.
	Secret string `db:"-" json:"secret,omitempty"`
}

func (e *Endpoint) settle() {
	e.Status = "enabled"
	if e.DisabledAt != nil {
		e.Status = "disabled"
	}
	e.CreatedAt = e.CreatedAt.UTC()
}

// EndpointInput is what a client sends to create an endpoint.
type EndpointInput struct {
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
}

// Validate checks the input as sent, resolving the URL's host under the policy.
func (s *Store) Validate(ctx context.Context, in EndpointInput) error {
	var errs InvalidError
	switch {
	case in.URL == "":
		errs = append(errs, FieldError{Field: "url", Message: "is required"})
	case len(in.URL) > 2048 || !utf8.ValidString(in.URL) || strings.ContainsAny(in.URL, "\x00 \t\r\n"):
		errs = append(errs, FieldError{Field: "url", Message: "must be a URL of at most 2048 characters"})
	default:
		if err := s.Policy.CheckURL(ctx, in.URL); err != nil {
			errs = append(errs, FieldError{Field: "url", Message: urlMessage(err, s.Policy)})
		}
	}
	if len(in.EventTypes) == 0 || len(in.EventTypes) > len(EventTypes) {
		errs = append(errs, FieldError{Field: "event_types", Message: "must list 1 or more of: " + strings.Join(EventTypes, ", ")})
	} else {
		seen := map[string]bool{}
		for _, t := range in.EventTypes {
			if !knownType(t) || seen[t] {
				errs = append(errs, FieldError{Field: "event_types", Message: "each must be one of " + strings.Join(EventTypes, ", ") + ", once"})
				break
			}
			seen[t] = true
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func urlMessage(err error, p Policy) string {
	if errors.Is(err, ErrForbiddenDestination) {
		if p.AllowLoopback {
			return "must be http or https to a public or loopback address: " + err.Error()
		}
		return "must be https to a public address (not loopback, private, link-local or reserved): " + err.Error()
	}
	return err.Error()
}

// Create registers an endpoint with a new signing secret, returned once in Secret.
func (s *Store) Create(ctx context.Context, clientID int64, in EndpointInput) (Endpoint, error) {
	if s.Sealer == nil {
		return Endpoint{}, ErrNoSecretsKey
	}
	if err := s.Validate(ctx, in); err != nil {
		return Endpoint{}, err
	}
	u, _ := url.Parse(in.URL)
	var e Endpoint
	err := s.inTx(ctx, "create webhook endpoint", func(tx *sqlx.Tx) error {
		// The count is taken under the client's lock (lockClientSQL): without it,
		// concurrent creations each counted fewer than MaxEndpoints and all inserted.
		var locked int64
		if err := tx.GetContext(ctx, &locked, lockClientSQL, clientID); err != nil {
			return fmt.Errorf("create webhook endpoint: lock client %d: %w", clientID, err)
		}
		var n int
		if err := tx.GetContext(ctx, &n, countEndpointsSQL, clientID); err != nil {
			return fmt.Errorf("create webhook endpoint: %w", err)
		}
		if n >= MaxEndpoints {
			return InvalidError{{Field: "url", Message: fmt.Sprintf("a client may have at most %d endpoints; delete one first", MaxEndpoints)}}
		}
		now := s.now()
		if err := tx.QueryRowxContext(ctx, insertEndpointSQL, clientID, u.String(), pq.StringArray(in.EventTypes), now).StructScan(&e); err != nil {
			return fmt.Errorf("create webhook endpoint: %w", err)
		}
		secret, err := s.addSecret(ctx, tx, e.InternalID, now)
		e.Secret = secret
		return err
	})
	e.settle()
	return e, err
}

// addSecret makes a new signing secret for the endpoint and stores it sealed.
func (s *Store) addSecret(ctx context.Context, tx *sqlx.Tx, endpoint int64, now time.Time) (string, error) {
	secret := stdwebhook.NewSecret()
	key, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		return "", err
	}
	sealed, err := s.Sealer.Seal(key, endpoint)
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, insertSecretSQL, endpoint, sealed, now); err != nil {
		return "", fmt.Errorf("store webhook secret: %w", err)
	}
	return secret, nil
}

// List returns the client's endpoints, newest first.
func (s *Store) List(ctx context.Context, clientID int64) ([]Endpoint, error) {
	es := []Endpoint{}
	if err := s.DB.SelectContext(ctx, &es, listEndpointsSQL, clientID, s.now()); err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	for i := range es {
		es[i].settle()
	}
	return es, nil
}

// Get returns one of the client's endpoints: ErrEndpointNotFound for an id that is not
// one, another client's included.
func (s *Store) Get(ctx context.Context, clientID int64, id string) (Endpoint, error) {
	var e Endpoint
	if !ValidEndpointID(id) {
		return e, ErrEndpointNotFound
	}
	err := s.DB.GetContext(ctx, &e, getEndpointSQL, clientID, id, s.now())
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrEndpointNotFound
	}
	if err != nil {
		return e, fmt.Errorf("get webhook endpoint: %w", err)
	}
	e.settle()
	return e, nil
}

// Delete stops every delivery to the endpoint. Its history stays for the console.
func (s *Store) Delete(ctx context.Context, clientID int64, id string) error {
	if !ValidEndpointID(id) {
		return ErrEndpointNotFound
	}
	res, err := s.DB.ExecContext(ctx, deleteEndpointSQL, clientID, id, s.now())
	if err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return ErrEndpointNotFound
	}
	return nil
}

// RotateSecret gives the endpoint a new secret, returned once in Secret. The secrets that
// signed until now go on signing beside it for overlap, so that every delivery in that
// time carries two signatures and verifies under either.
func (s *Store) RotateSecret(ctx context.Context, clientID int64, id string, overlap time.Duration) (Endpoint, error) {
	if s.Sealer == nil {
		return Endpoint{}, ErrNoSecretsKey
	}
	if !ValidEndpointID(id) {
		return Endpoint{}, ErrEndpointNotFound
	}
	var secret string
	err := s.inTx(ctx, "rotate webhook secret", func(tx *sqlx.Tx) error {
		var internal int64
		err := tx.GetContext(ctx, &internal, lockEndpointSQL, clientID, id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrEndpointNotFound
		}
		if err != nil {
			return fmt.Errorf("rotate webhook secret: %w", err)
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, expireSecretsSQL, internal, now.Add(overlap)); err != nil {
			return fmt.Errorf("rotate webhook secret: %w", err)
		}
		secret, err = s.addSecret(ctx, tx, internal, now)
		return err
	})
	if err != nil {
		return Endpoint{}, err
	}
	e, err := s.Get(ctx, clientID, id)
	e.Secret = secret
	return e, err
}

// signingKeys returns the keys that sign a delivery to the endpoint at now: the current
// secret first, then any still in its overlap.
func signingKeys(ctx context.Context, q sqlx.QueryerContext, sealer *Sealer, endpoint int64, now time.Time) ([]stdwebhook.Key, error) {
	var sealed [][]byte
	if err := sqlx.SelectContext(ctx, q, &sealed, signingSecretsSQL, endpoint, now); err != nil {
		return nil, fmt.Errorf("signing secrets of endpoint %d: %w", endpoint, err)
	}
	keys := make([]stdwebhook.Key, 0, len(sealed))
	for _, b := range sealed {
		k, err := sealer.Open(b, endpoint)
		if err != nil {
			return nil, err
		}
		keys = append(keys, stdwebhook.Key(k))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("endpoint %d has no signing secret", endpoint)
	}
	return keys, nil
}

func (s *Store) inTx(ctx context.Context, what string, f func(tx *sqlx.Tx) error) error {
	return db.InTx(ctx, s.DB, what, f)
}
