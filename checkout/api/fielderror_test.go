package api_test

import (
	"reflect"
	"testing"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/deliveries"
)

// TestOneFieldErrorType: an invalid endpoint (hooks) and an invalid order (checkout) list
// their fields with the one type, so that validation_failed cannot list them two ways and
// a field added to one is in the other.
func TestOneFieldErrorType(t *testing.T) {
	if a, b := reflect.TypeOf(checkout.FieldError{}), reflect.TypeOf(deliveries.FieldError{}); a != b {
		t.Fatalf("checkout.FieldError is %v, deliveries.FieldError is %v: want one type", a, b)
	}
}
