// Package deliveries sends a client's events to the webhook endpoints it registered, in the
// Standard Webhooks format (checkout/stdwebhook signs). An event of the outbox fans out, in
// the outbox's transaction, to one delivery per enabled endpoint subscribed to its type;
// each delivery is attempted by a job until the endpoint answers 2xx or the retry horizon
// (about three days) passes. Every attempt of a delivery, and every manual redelivery from
// the console, sends the same body under the same webhook-id (the event's id), so that a
// receiver deduplicating by webhook-id (checkout/stdwebhook.Receive) applies each event once.
//
// The package owns the tables of migration 00020 and knows nothing of HTTP handlers or
// HTML; checkout/api and the console call it.
package deliveries

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/tekrar/tekrar/checkout/fields"
	"github.com/tekrar/tekrar/checkout/outbox"
)

// EventTypes are the types a client can subscribe an endpoint to: every type of the
// outbox. docs/outbox.md gives each one's data.
var EventTypes = outbox.Types

// Errors of the endpoint operations; checkout/api answers each with its problem.
var (
	ErrEndpointNotFound = errors.New("webhook endpoint not found")
	ErrDeliveryNotFound = errors.New("webhook delivery not found")
)

// FieldError is one invalid field of an endpoint as a client sent it: checkout.FieldError,
// the same type (see package fields for why it lives there).
type FieldError = fields.Error

// InvalidError lists every invalid field at once.
type InvalidError []FieldError

func (e InvalidError) Error() string {
	return fmt.Sprintf("invalid webhook endpoint: %v", []FieldError(e))
}

var publicIDRe = regexp.MustCompile(`^we_[0-9a-f]{32}$`)

// ValidEndpointID reports whether s has the shape of an endpoint's public id; anything else
// is not found without a query.
func ValidEndpointID(s string) bool { return publicIDRe.MatchString(s) }

func knownType(t string) bool { return slices.Contains(EventTypes, t) }
