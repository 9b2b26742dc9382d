package clients

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestAProviderCustomerIsNeverAnotherClients: the provider customer of a client's customer
// names that client by a prefix of its own, stored with it, and never by its id. A client
// created after another was lost (a failover that lost the last commits, a restore) may get
// the lost client's id; it gets a prefix of its own all the same, so its customers never name
// at the provider the cards the lost client's backend saved there. Pairs that plain
// concatenation would confuse get different ids, and the longest customer fits the
// provider's 255 characters.
func TestAProviderCustomerIsNeverAnotherClients(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	shape := regexp.MustCompile(`^cl_[0-9a-f]{24}_$`)

	lost, err := Create(ctx, db, "lost", NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	if !shape.MatchString(lost.ProviderCustomerPrefix) || strings.Contains(lost.ProviderCustomerPrefix, "_"+strconv.FormatInt(lost.ID, 10)+"_") {
		t.Fatalf("prefix %q: want cl_, 24 hex digits and _, with no id in it", lost.ProviderCustomerPrefix)
	}
	// The failover: the client's row is gone and its id is handed out again.
	if _, err := db.Exec(`DELETE FROM clients WHERE id = $1`, lost.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT setval(pg_get_serial_sequence('clients', 'id'), $1, false)`, lost.ID); err != nil {
		t.Fatal(err)
	}
	secret := NewSecret()
	next, err := Create(ctx, db, "next", secret)
	if err != nil {
		t.Fatal(err)
	}
	if next.ID != lost.ID {
		t.Fatalf("the next client got id %d, want the lost client's %d", next.ID, lost.ID)
	}
	if next.ProviderCustomer("cus_1") == lost.ProviderCustomer("cus_1") {
		t.Fatalf("the next client's cus_1 is the lost client's at the provider: %q", next.ProviderCustomer("cus_1"))
	}

	// What authentication and Get load is what Create returned.
	got, _, err := Get(ctx, db, next.ID)
	if err != nil {
		t.Fatal(err)
	}
	authed, err := lookup(ctx, db, Hash(secret))
	if err != nil {
		t.Fatal(err)
	}
	if got.ProviderCustomerPrefix != next.ProviderCustomerPrefix || authed.ProviderCustomerPrefix != next.ProviderCustomerPrefix {
		t.Errorf("prefix: Get's %q, authentication's %q, Create's %q", got.ProviderCustomerPrefix, authed.ProviderCustomerPrefix, next.ProviderCustomerPrefix)
	}

	// No two (client, customer) pairs share a provider customer: the prefix holds its last
	// "_" only, so it is read back unambiguously whatever the customer id holds.
	a, b := Client{ProviderCustomerPrefix: "cl_1_"}, Client{ProviderCustomerPrefix: "cl_12_"}
	for _, tc := range []struct {
		x, y       Client
		cusX, cusY string
	}{
		{a, b, "2_cus", "cus"},
		{a, a, "_cus", "cus"},
		{a, Client{ProviderCustomerPrefix: "cl_2_"}, "cl_2_cus", "cus"},
		{next, got, "cus_1", "cus_2"},
	} {
		if tc.x.ProviderCustomer(tc.cusX) == tc.y.ProviderCustomer(tc.cusY) && tc.cusX != tc.cusY {
			t.Errorf("%q's %q and %q's %q are both %q", tc.x.ProviderCustomerPrefix, tc.cusX, tc.y.ProviderCustomerPrefix, tc.cusY, tc.x.ProviderCustomer(tc.cusX))
		}
	}
	// 200 is checkout.MaxCustomer, the longest customer id a client may send.
	longestOld := Client{ProviderCustomerPrefix: "cl_" + strconv.FormatInt(math.MaxInt64, 10) + "_"}
	for _, c := range []Client{next, longestOld} {
		if n := len(c.ProviderCustomer(strings.Repeat("c", 200))); n > 255 {
			t.Errorf("the longest provider customer of %q has %d characters", c.ProviderCustomerPrefix, n)
		}
	}
}
