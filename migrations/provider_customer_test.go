package migrations_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/migrations"
)

// TestExistingClientsKeepTheirProviderCustomer: migration 00040 gives a client that existed
// before it the prefix its backend saved cards under, cl_<id>_, and every client created
// after it a random one of its own.
func TestExistingClientsKeepTheirProviderCustomer(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := migrations.NewProvider(d.DB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 39); err != nil {
		t.Fatal(err)
	}
	var old int64
	if err := d.GetContext(ctx, &old, `INSERT INTO clients (name, secret_hash) VALUES ('old', sha256('old')) RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var prefix string
	if err := d.GetContext(ctx, &prefix, `SELECT provider_customer_prefix FROM clients WHERE id = $1`, old); err != nil {
		t.Fatal(err)
	}
	if want := "cl_" + strconv.FormatInt(old, 10) + "_"; prefix != want {
		t.Errorf("the existing client's prefix is %q, want %q", prefix, want)
	}
	if err := d.GetContext(ctx, &prefix, `INSERT INTO clients (name, secret_hash) VALUES ('new', sha256('new')) RETURNING provider_customer_prefix`); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^cl_[0-9a-f]{24}_$`).MatchString(prefix) {
		t.Errorf("a new client's prefix is %q, want cl_ and 24 hex digits", prefix)
	}
}
