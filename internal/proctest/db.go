package proctest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// OpenDB connects to a test database for assertions.
func OpenDB(t testing.TB, url string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Connect("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// CountRows runs a query that returns one count.
func CountRows(t testing.TB, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := db.GetContext(ctx, &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// NewClientSecret creates an API client with `tekrar clients create` and returns the secret,
// checking that it is printed alone on one line.
func NewClientSecret(t testing.TB, dbURL, name string) string {
	t.Helper()
	stdout := MustRun(t, ChildEnv("DATABASE_URL="+dbURL), nil, "clients", "create", name)
	if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("clients create printed %q, want exactly one line", stdout)
	}
	secret := strings.TrimSuffix(stdout, "\n")
	if !strings.HasPrefix(secret, "tekrar_sk_") || strings.ContainsAny(secret, " \t\r") {
		t.Fatalf("clients create printed %q, want a tekrar_sk_ secret alone", stdout)
	}
	return secret
}

// OrderJSONBody is a valid POST /v1/orders body of one item for amount, paid with token.
func OrderJSONBody(amount int64, token string) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":%d}],"amount":%d,"payment":{"card_token":%q}}`,
		amount, amount, token))
}
