package checkout

import (
	"reflect"
	"strings"
	"testing"
)

// TestValidationErrorsInOneOrder: a refused body's errors come in the same order on every
// resend, so its answer is the same bytes each time (metadata is a map, whose range order
// Go varies on purpose).
func TestValidationErrorsInOneOrder(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("v", MaxMetadataValue+1)
	in := OrderInput{Currency: "TRY", Amount: 100, Items: []Item{{SKU: "S", Name: "S", Quantity: 1, UnitAmount: 100}},
		Payment:  PaymentInput{CardToken: "tok_visa"},
		Metadata: map[string]string{"a": long, "b": long, "c": long, "d": long, "e": long, "f": long, "g": "bad\x00"}}
	first := in.Validate()
	if len(first) != 7 {
		t.Fatalf("%d errors, want 7: %v", len(first), first)
	}
	for i := 0; i < 50; i++ {
		if again := in.Validate(); !reflect.DeepEqual(again, first) {
			t.Fatalf("errors in another order:\n%v\nwas\n%v", again, first)
		}
	}
}
