package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/tekrar/tekrar/checkout/psp"
)

// SignatureHeader carries a Stripe webhook's signature.
const SignatureHeader = "Stripe-Signature"

// Stripe's event types that become the provider events the inbox applies.
const (
	EventPaymentIntentSucceeded = "payment_intent.succeeded"
	EventPaymentIntentFailed    = "payment_intent.payment_failed"
	EventChargeRefunded         = "charge.refunded"
)

// ErrSignature is a delivery whose Stripe-Signature does not verify under the endpoint's
// secret (or is missing, malformed, or older than webhook.DefaultTolerance): nothing of it
// may be stored. errors.Is also finds stripe-go's own reason (webhook.ErrTooOld...).
var ErrSignature = errors.New("stripe: the webhook's Stripe-Signature does not verify")

// EventOf verifies payload, a Stripe webhook's body, against header (its Stripe-Signature)
// under the endpoint's signing secret (whsec_…), with stripe-go's webhook package and its
// default tolerance of five minutes, and returns the provider event it carries, in the
// shape of the sandbox's events: payment_intent.succeeded is psp.EventChargeSucceeded,
// payment_intent.payment_failed psp.EventChargeFailed, and charge.refunded
// psp.EventChargeRefunded (psp.EventRefundSucceeded while part of the charge is left). The
// charge is named by its PaymentIntent, as the provider's charges are, and its key is the
// one tekrar set in its metadata. Any other type is returned with no charge: the inbox
// stores it and acts on nothing.
//
// Stripe numbers no event of a charge, so the sequence the inbox orders them by is the
// event's created second: an older event never undoes a newer one, and of two events of a
// charge in the same second the first applied stands (the next reconciliation catches the
// other). The event's API version is not compared with stripe-go's: the fields read here
// are the same in every version, and a refusal would be repeated for days.
func EventOf(payload []byte, header, secret string) (psp.Event, error) {
	if err := webhook.ValidatePayload(payload, header, secret); err != nil {
		return psp.Event{}, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	return DecodeEvent(payload)
}

// DecodeEvent is EventOf without the signature: the provider event of a body verified
// already (a dead letter the console replays).
func DecodeEvent(payload []byte) (psp.Event, error) {
	var e stripego.Event
	if err := json.Unmarshal(payload, &e); err != nil {
		return psp.Event{}, fmt.Errorf("stripe: webhook body: %w", err)
	}
	pe := psp.Event{ID: e.ID, Type: string(e.Type), Created: time.Unix(e.Created, 0).UTC()}
	if e.ID == "" || e.Type == "" {
		return pe, errors.New("stripe: webhook body: an event needs an id and a type")
	}
	if e.Created <= 0 || e.Created > math.MaxInt32 {
		return pe, fmt.Errorf("stripe: event %s: created %d is no sequence", e.ID, e.Created)
	}
	seq := int(e.Created)
	if e.Data == nil {
		return pe, nil
	}
	switch string(e.Type) {
	case EventPaymentIntentSucceeded, EventPaymentIntentFailed:
		var pi stripego.PaymentIntent
		if err := json.Unmarshal(e.Data.Raw, &pi); err != nil {
			return pe, fmt.Errorf("stripe: event %s: its payment intent: %w", e.ID, err)
		}
		pe.Type = psp.EventChargeSucceeded
		d := psp.EventData{ChargeID: pi.ID, ChargeKey: pi.Metadata[MetaKey], Description: pi.Description, Sequence: seq,
			Amount: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)), Status: psp.StatusSucceeded}
		if string(e.Type) == EventPaymentIntentFailed {
			pe.Type, d.Status, d.DeclineCode = psp.EventChargeFailed, psp.StatusDeclined, psp.DeclineCardDeclined
			if pi.LastPaymentError != nil {
				d.DeclineCode = declineCode(pi.LastPaymentError)
			}
		}
		if ch := pi.LatestCharge; ch != nil && ch.PaymentMethodDetails != nil && ch.PaymentMethodDetails.Card != nil {
			d.CardBrand, d.CardLast4 = string(ch.PaymentMethodDetails.Card.Brand), ch.PaymentMethodDetails.Card.Last4
		}
		pe.Data = d
	case EventChargeRefunded:
		var ch stripego.Charge
		if err := json.Unmarshal(e.Data.Raw, &ch); err != nil {
			return pe, fmt.Errorf("stripe: event %s: its charge: %w", e.ID, err)
		}
		d := psp.EventData{ChargeID: ch.ID, ChargeKey: ch.Metadata[MetaKey], Description: ch.Description, Sequence: seq,
			Amount: ch.Amount, Currency: strings.ToUpper(string(ch.Currency)), Status: psp.StatusSucceeded,
			RefundedAmount: min(ch.AmountRefunded, ch.Amount)}
		if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
			d.ChargeID = ch.PaymentIntent.ID
		}
		if c := ch.PaymentMethodDetails; c != nil && c.Card != nil {
			d.CardBrand, d.CardLast4 = string(c.Card.Brand), c.Card.Last4
		}
		pe.Type = psp.EventChargeRefunded
		if d.RefundedAmount < d.Amount {
			pe.Type = psp.EventRefundSucceeded
		}
		pe.Data = d
	}
	return pe, nil
}
