package clients

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// countingDB counts the queries that reach the database.
type countingDB struct {
	*sqlx.DB
	n atomic.Int64
}

func (c *countingDB) QueryRowxContext(ctx context.Context, q string, args ...any) *sqlx.Row {
	c.n.Add(1)
	return c.DB.QueryRowxContext(ctx, q, args...)
}

func (c *countingDB) QueryxContext(ctx context.Context, q string, args ...any) (*sqlx.Rows, error) {
	c.n.Add(1)
	return c.DB.QueryxContext(ctx, q, args...)
}

func (c *countingDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.n.Add(1)
	return c.DB.QueryContext(ctx, q, args...)
}

func TestAuthenticatorCaches(t *testing.T) {
	ctx := context.Background()
	db := &countingDB{DB: dbtest.New(t)}
	secret := NewSecret()
	created, err := Create(ctx, db.DB, "app", secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a := NewAuthenticator(db, 30*time.Second)
	a.now = func() time.Time { return now }

	for i := 0; i < 100; i++ {
		c, err := a.Authenticate(ctx, secret)
		if err != nil || c.ID != created.ID || c.KeyTTL != 24*time.Hour {
			t.Fatalf("authenticate: %+v %v", c, err)
		}
	}
	if n := db.n.Load(); n != 1 {
		t.Fatalf("%d queries for 100 authentications, want 1", n)
	}
	// Unknown secrets are remembered briefly too.
	for i := 0; i < 100; i++ {
		if _, err := a.Authenticate(ctx, "tekrar_sk_unknown"); !errors.Is(err, ErrUnknown) {
			t.Fatalf("unknown secret: %v", err)
		}
	}
	if n := db.n.Load(); n != 2 {
		t.Fatalf("%d queries after 100 unknown secrets, want 2", n)
	}
	// A disabled client is refused once its cache entry expires.
	if _, err := db.Exec(`UPDATE clients SET disabled_at = now() WHERE id = $1`, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatalf("within the TTL the cached client still works: %v", err)
	}
	now = now.Add(31 * time.Second)
	if _, err := a.Authenticate(ctx, secret); !errors.Is(err, ErrUnknown) {
		t.Fatalf("disabled client after the TTL: %v", err)
	}
}

func TestSecretsAreStoredHashed(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	secret := NewSecret()
	if len(secret) != len(SecretPrefix)+43 {
		t.Fatalf("secret %q", secret)
	}
	if _, err := Create(ctx, db, "app", secret); err != nil {
		t.Fatal(err)
	}
	var found int
	if err := db.Get(&found, `SELECT count(*) FROM clients WHERE position($1 in encode(secret_hash, 'escape')) > 0 OR name = $1`, secret); err != nil {
		t.Fatal(err)
	}
	if found != 0 {
		t.Fatal("the secret is stored in plain text")
	}
	h := Hash(secret)
	if err := db.Get(&found, `SELECT count(*) FROM clients WHERE secret_hash = $1`, h[:]); err != nil || found != 1 {
		t.Fatalf("hash not stored: %d %v", found, err)
	}
}
