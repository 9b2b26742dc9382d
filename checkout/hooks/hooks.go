// Package hooks sends a client's events to the webhook endpoints it registered, in the
// Standard Webhooks format (checkout/webhook signs). An event of the outbox fans out, in
// the outbox's transaction, to one delivery per enabled endpoint subscribed to its type;
// each delivery is attempted by a job until the endpoint answers 2xx or the retry horizon
// (about three days) passes. Every attempt of a delivery, and every manual redelivery from
// the console, sends the same body under the same webhook-id (the event's id), so that a
// receiver deduplicating by webhook-id (checkout/webhook.Receive) applies each event once.
//
// The package owns the tables of migration 00020 and knows nothing of HTTP handlers or
// HTML; checkout/api and the console call it.
package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Event types a client can subscribe an endpoint to. docs/webhooks-out.md gives each
// one's payload.
var EventTypes = []string{
	"order.paid",
	"order.declined",
	"order.canceled",
	"order.refunded",
	"order.disputed",
	"refund.succeeded",
}

// Event is what is sent: one fact about one of the client's resources. The payload is
// thin on purpose: the id of the resource, for the receiver to GET it from /v1 when it
// needs more, so that the payload's schema stays stable.
type Event struct {
	ID        string          // evt_..., the webhook-id of every delivery of it
	Type      string          // one of EventTypes
	ClientID  int64           // whose endpoints receive it
	CreatedAt time.Time       // when the fact happened
	Data      json.RawMessage // the thin object, e.g. {"object":"order","id":"ord_..."}
}

// Payload is the body of every delivery of e: its bytes are stored with the delivery and
// sent as they are on every attempt.
func (e Event) Payload() ([]byte, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	b, err := json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		CreatedAt string          `json:"created_at"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.CreatedAt.UTC().Format(time.RFC3339), data})
	if err != nil {
		return nil, fmt.Errorf("payload of %s: %w", e.ID, err)
	}
	return b, nil
}

// Errors of the endpoint operations; checkout/api answers each with its problem.
var (
	ErrEndpointNotFound = errors.New("webhook endpoint not found")
	ErrDeliveryNotFound = errors.New("webhook delivery not found")
)

// FieldError is one invalid field of an endpoint as a client sent it.
type FieldError struct {
	Field   string
	Message string
}

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
