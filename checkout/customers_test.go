package checkout

import (
	"math"
	"strings"
	"testing"
)

// TestProviderCustomerNamesItsClient: the provider customer id of a client's customer names
// that client, so no client can name another's customer, whatever id it sends: pairs that
// plain concatenation would confuse get different ids, and the longest customer a client
// may send fits the provider's 255 characters with the largest client id.
func TestProviderCustomerNamesItsClient(t *testing.T) {
	type named struct {
		client   int64
		customer string
	}
	for _, tc := range []struct{ a, b named }{
		{a: named{1, "2_cus"}, b: named{12, "cus"}},
		{a: named{1, "_cus"}, b: named{1, "cus"}},
		{a: named{1, "cl_2_cus"}, b: named{2, "cus"}},
		{a: named{3, "cus_1"}, b: named{4, "cus_1"}},
	} {
		x, y := ProviderCustomer(tc.a.client, tc.a.customer), ProviderCustomer(tc.b.client, tc.b.customer)
		if x == y {
			t.Errorf("client %d's %q and client %d's %q are both %q", tc.a.client, tc.a.customer, tc.b.client, tc.b.customer, x)
		}
	}
	if got := ProviderCustomer(7, "cus_1"); got != "cl_7_cus_1" {
		t.Errorf("ProviderCustomer(7, cus_1) = %q", got)
	}
	if n := len(ProviderCustomer(math.MaxInt64, strings.Repeat("c", MaxCustomer))); n > 255 {
		t.Errorf("the longest provider customer has %d characters", n)
	}
}
