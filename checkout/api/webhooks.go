package api

import (
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/inbox"
	"github.com/tekrar/tekrar/checkout/stdwebhook"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

// maxWebhookBody bounds a provider webhook's body; the sandbox's are under 2 KiB.
const maxWebhookBody = 256 << 10

// readWebhookBody reads a provider webhook's body, bounded by maxWebhookBody, for every
// provider's door; on failure it has answered the problem and reports false.
func readWebhookBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxWebhookBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		server.Abort(c, problem.Of(problem.CodeBodyTooLarge))
		return nil, false
	case err != nil:
		server.Abort(c, problem.Of(problem.CodeMalformedRequest).WithDetail("the body could not be read"))
		return nil, false
	}
	return body, true
}

// ProviderInbox answers POST /webhooks/psp: the payment provider's webhooks, outside /v1's
// client authentication. The Standard Webhooks signature (under one of keys) and a
// timestamp within five minutes are checked before anything is read or stored: a forged,
// stale or altered delivery is 400 webhook_signature_invalid, stores nothing of itself and
// is only counted, by reason class, for the console (CountRefusal). A verified event is
// recorded once (a redelivery is acknowledged with 200 and counted) and applied in its
// charge's order; an event type tekrar does not act on is stored and acknowledged, not
// refused, so that the provider stops resending it. A verified delivery tekrar can never
// store or apply as it is (inbox.UnstorableEventError) is kept raw as a dead letter and
// acknowledged with 200 and the outcome dead_letter; only a failure that may pass is 5xx.
func ProviderInbox(in *inbox.Inbox, keys []stdwebhook.Key, logger *slog.Logger) gin.HandlerFunc {
	verifier := stdwebhook.Verifier{Keys: keys}
	return func(c *gin.Context) {
		body, ok := readWebhookBody(c)
		if !ok {
			return
		}
		m, err := verifier.Verify(c.Request.Header, body)
		if err != nil {
			logger.Warn("provider webhook refused", "err", err, "request_id", server.RequestID(c))
			countRefusal(c, in, refusalReason(err))
			server.Abort(c, problem.Of(problem.CodeWebhookSignatureInvalid).WithDetail(err.Error()))
			return
		}
		e, err := inbox.Decode(body)
		if e.ID != "" && e.ID != m.ID {
			// The id deduplication goes by must be the one the signature covers.
			countRefusal(c, in, inbox.RefusalIDMismatch)
			server.Abort(c, problem.Of(problem.CodeWebhookSignatureInvalid).WithDetail("webhook-id is not the event's id"))
			return
		}
		if err != nil {
			// Signed, so the provider's word, but not storable as it is: kept raw and
			// acknowledged, never refused for ever.
			if err := in.DeadLetter(c.Request.Context(), "psp", m.ID, body, err); err != nil {
				inboxFailed(c, in, logger, m.ID, err)
				return
			}
			logger.Warn("provider webhook kept as a dead letter", "err", err, "event_id", m.ID, "request_id", server.RequestID(c))
			c.JSON(http.StatusOK, gin.H{"id": m.ID, "outcome": inbox.OutcomeDeadLetter})
			return
		}
		outcome, err := in.Receive(c.Request.Context(), "psp", body, e)
		if err != nil {
			inboxFailed(c, in, logger, e.ID, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"id": e.ID, "outcome": outcome})
	}
}

// inboxFailed answers a verified delivery that failed for a reason that may pass: 5xx, for
// the provider to deliver it again.
func inboxFailed(c *gin.Context, in *inbox.Inbox, logger *slog.Logger, id string, err error) {
	p := problem.Internal()
	if db.IsUnavailable(err) {
		p = checkout.StoreUnavailable()
	}
	logger.Warn("provider webhook not applied", "err", err, "event_id", id, "request_id", server.RequestID(c))
	countRefusal(c, in, inbox.RefusalApplyFailed)
	server.Abort(c, p) // the provider delivers it again
}

// countRefusal counts a refused or failed delivery for the console. Counting never waits
// on the database (Inbox.CountRefusal).
func countRefusal(c *gin.Context, in *inbox.Inbox, reason string) {
	in.CountRefusal(reason, c.ClientIP())
}

// refusalReason classes an error of the verifier.
func refusalReason(err error) string {
	switch {
	case errors.Is(err, stdwebhook.ErrTooOld):
		return inbox.RefusalStale
	case errors.Is(err, stdwebhook.ErrTooNew):
		return inbox.RefusalFuture
	case errors.Is(err, stdwebhook.ErrMissingHeaders), errors.Is(err, stdwebhook.ErrBadTimestamp):
		return inbox.RefusalMalformedHeaders
	default:
		return inbox.RefusalBadSignature
	}
}
