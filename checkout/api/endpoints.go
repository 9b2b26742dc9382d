package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/deliveries"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

// The client's webhook endpoints: /v1/webhook-endpoints. These POSTs take no
// Idempotency-Key: the answer that creates an endpoint (or rotates its secret) carries the
// signing secret, and a replay would need it stored in clear beside the idempotency key,
// which is what sealing it (docs/webhooks-out.md) avoids. A retried creation makes a
// second endpoint, which the list shows and DELETE removes.

func (a *handlers) createEndpoint(c *gin.Context) {
	body, p := readJSON(c.Request, a.maxBody)
	if p != nil {
		server.Abort(c, p)
		return
	}
	var in deliveries.EndpointInput
	if p := decodeStrict(body, &in); p != nil {
		server.Abort(c, p)
		return
	}
	e, err := a.endpoints.Create(c.Request.Context(), client(c).ID, in)
	if err != nil {
		a.failEndpoint(c, err)
		return
	}
	c.Header("Location", "/v1/webhook-endpoints/"+e.ID)
	c.JSON(http.StatusCreated, e)
}

func (a *handlers) listEndpoints(c *gin.Context) {
	es, err := a.endpoints.List(c.Request.Context(), client(c).ID)
	if err != nil {
		a.failEndpoint(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"data": es})
}

func (a *handlers) getEndpoint(c *gin.Context) {
	e, err := a.endpoints.Get(c.Request.Context(), client(c).ID, c.Param("id"))
	if err != nil {
		a.failEndpoint(c, err)
		return
	}
	c.JSON(http.StatusOK, e)
}

func (a *handlers) deleteEndpoint(c *gin.Context) {
	if err := a.endpoints.Delete(c.Request.Context(), client(c).ID, c.Param("id")); err != nil {
		a.failEndpoint(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// rotateInput is the optional body of rotate-secret.
type rotateInput struct {
	// OverlapSeconds is how long the old secret keeps signing beside the new one.
	OverlapSeconds *int64 `json:"overlap_seconds"`
}

func (a *handlers) rotateEndpointSecret(c *gin.Context) {
	overlap := deliveries.DefaultOverlap
	if c.Request.ContentLength != 0 {
		body, p := readJSON(c.Request, a.maxBody)
		if p != nil {
			server.Abort(c, p)
			return
		}
		var in rotateInput
		if p := decodeStrict(body, &in); p != nil {
			server.Abort(c, p)
			return
		}
		if in.OverlapSeconds != nil {
			if *in.OverlapSeconds < 0 || *in.OverlapSeconds > int64(deliveries.MaxOverlap/time.Second) {
				server.Abort(c, invalid([]checkout.FieldError{{Field: "overlap_seconds", Message: "must be 0 to 604800 (seven days)"}}))
				return
			}
			overlap = time.Duration(*in.OverlapSeconds) * time.Second
		}
	}
	e, err := a.endpoints.RotateSecret(c.Request.Context(), client(c).ID, c.Param("id"), overlap)
	if err != nil {
		a.failEndpoint(c, err)
		return
	}
	c.JSON(http.StatusOK, e)
}

// resendInput is the body of resend: the window of event times, [since, until), RFC 3339.
type resendInput struct {
	Since string `json:"since" tekrar:"required"`
	Until string `json:"until" tekrar:"required"`
}

// resendEndpoint answers POST /v1/webhook-endpoints/{id}/resend: every event of the window
// the endpoint did not receive is sent again under its own webhook-id, and a disabled
// endpoint is enabled. It takes no Idempotency-Key: a resend asked again queues nothing
// more (deliveries.Store.Resend), so a retried call is safe as it is.
func (a *handlers) resendEndpoint(c *gin.Context) {
	body, p := readJSON(c.Request, a.maxBody)
	if p != nil {
		server.Abort(c, p)
		return
	}
	var in resendInput
	if p := decodeStrict(body, &in); p != nil {
		server.Abort(c, p)
		return
	}
	var w deliveries.Window
	var errs []checkout.FieldError
	for _, f := range []struct {
		name, value string
		to          *time.Time
	}{{"since", in.Since, &w.Since}, {"until", in.Until, &w.Until}} {
		t, err := time.Parse(time.RFC3339, f.value)
		if err != nil {
			errs = append(errs, checkout.FieldError{Field: f.name, Message: "must be an RFC 3339 time, such as 2026-12-03T15:30:00Z"})
			continue
		}
		*f.to = t
	}
	if len(errs) > 0 {
		server.Abort(c, invalid(errs))
		return
	}
	res, err := a.endpoints.Resend(c.Request.Context(), client(c).ID, c.Param("id"), w)
	if err != nil {
		a.failEndpoint(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// invalid is validation_failed for a request without an Idempotency-Key.
func invalid(errs []checkout.FieldError) *problem.Problem {
	return problem.Of(problem.CodeValidationFailed).
		WithDetail("fix the listed fields and resend; nothing was stored").With("errors", errs)
}

func (a *handlers) failEndpoint(c *gin.Context, err error) {
	var bad deliveries.InvalidError
	switch {
	case errors.As(err, &bad):
		server.Abort(c, invalid(bad))
	case errors.Is(err, deliveries.ErrEndpointNotFound):
		server.Abort(c, problem.Of(problem.CodeWebhookEndpointNotFound))
	case errors.Is(err, deliveries.ErrNoSecretsKey):
		server.Abort(c, problem.Of(problem.CodeWebhookSecretsKeyMissing))
	default:
		a.failRead(c, err)
	}
}
