package stripe_test

import (
	"os"
	"testing"

	"github.com/tekrar/tekrar/checkout/psp/stripe/stripetest"
)

// One stripe-mock serves every test of the package: it keeps no state, and each test puts
// its own fault layer in front of it.
func TestMain(m *testing.M) { os.Exit(stripetest.Main(m)) }
