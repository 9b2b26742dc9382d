package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/psp/stripe"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

// StripeProvider is the provider name Stripe's events are recorded under in the inbox.
const StripeProvider = "stripe"

// StripeInbox answers POST /webhooks/stripe: Stripe's webhooks into the same provider inbox
// as the sandbox's (ProviderInbox). The Stripe-Signature is verified under the endpoint's
// secret by stripe-go (stripe.EventOf) before anything is read or stored: a forged, stale
// or altered delivery is 400 webhook_signature_invalid, stores nothing and is only counted.
// A verified event is recorded once under its id and applied in its charge's order; a type
// tekrar does not act on is stored and acknowledged; a verified body tekrar cannot read is
// kept as a dead letter and acknowledged, and only a failure that may pass is 5xx, for
// Stripe to deliver it again.
func StripeInbox(in *inbox.Inbox, secret string, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		body, ok := readWebhookBody(c)
		if !ok {
			return
		}
		e, err := stripe.EventOf(body, c.GetHeader(stripe.SignatureHeader), secret)
		if errors.Is(err, stripe.ErrSignature) {
			logger.Warn("stripe webhook refused", "err", err, "request_id", server.RequestID(c))
			countRefusal(c, in, stripeRefusalReason(err))
			server.Abort(c, problem.Of(problem.CodeWebhookSignatureInvalid).WithDetail(err.Error()))
			return
		}
		if err != nil {
			// Signed by Stripe, but not an event tekrar can read: kept raw and
			// acknowledged, never refused for ever.
			cause := &inbox.UnstorableEventError{Reason: inbox.DeadNotAnEvent, Detail: err.Error()}
			if err := in.DeadLetter(c.Request.Context(), StripeProvider, e.ID, body, cause); err != nil {
				inboxFailed(c, in, logger, e.ID, err)
				return
			}
			logger.Warn("stripe webhook kept as a dead letter", "err", err, "event_id", e.ID, "request_id", server.RequestID(c))
			c.JSON(http.StatusOK, gin.H{"id": e.ID, "outcome": inbox.OutcomeDeadLetter})
			return
		}
		outcome, err := in.Receive(c.Request.Context(), StripeProvider, body, e)
		if err != nil {
			inboxFailed(c, in, logger, e.ID, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"id": e.ID, "outcome": outcome})
	}
}

// stripeRefusalReason classes a refused Stripe-Signature as the inbox counts refusals.
func stripeRefusalReason(err error) string {
	switch {
	case errors.Is(err, webhook.ErrTooOld):
		return inbox.RefusalStale
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader):
		return inbox.RefusalMalformedHeaders
	default:
		return inbox.RefusalBadSignature
	}
}
