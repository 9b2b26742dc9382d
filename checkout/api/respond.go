package api

import (
	"errors"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

// keyed carries what every response to a keyed request echoes.
type keyed struct {
	key string // the key; empty when the header was missing or invalid
	raw string // the header as sent, echoed back in the same form
}

// writeResult sends a stored or fresh response with the idempotency headers.
func writeResult(c *gin.Context, k keyed, res checkout.Result) {
	h := c.Writer.Header()
	for name, v := range res.Header {
		h.Set(name, v)
	}
	setKeyHeaders(c, k, res.Replayed, res.ExpiresAt)
	if res.WaitedFor > 0 {
		h.Set("Preference-Applied", "wait="+strconv.Itoa(int(res.WaitedFor.Seconds())))
	}
	h.Set("Content-Length", strconv.Itoa(len(res.Body)))
	c.Status(res.Status)
	_, _ = c.Writer.Write(res.Body)
}

func setKeyHeaders(c *gin.Context, k keyed, replayed bool, expires time.Time) {
	h := c.Writer.Header()
	h.Set("Idempotent-Replayed", strconv.FormatBool(replayed))
	if k.key != "" {
		h.Set("Idempotency-Key", k.raw)
	}
	if !expires.IsZero() {
		h.Set("Idempotency-Expires", expires.UTC().Format(time.RFC3339))
	}
}

// fail answers a keyed request that did not produce a response: a problem from the
// domain, the store being down, or a bug.
func (a *handlers) fail(c *gin.Context, k keyed, err error) {
	var p *problem.Problem
	switch {
	case errors.As(err, &p):
	case db.IsUnavailable(err):
		a.logger.Warn("store unavailable", "err", err, "request_id", server.RequestID(c))
		c.Header("Retry-After", "2")
		p = checkout.StoreUnavailable()
	default:
		a.logger.Error("keyed request failed", "err", err, "request_id", server.RequestID(c))
		p = problem.Internal()
	}
	switch p.Code {
	case "idempotency_key_in_use", "payment_pending", "needs_attention":
		c.Header("Retry-After", "1")
	}
	setKeyHeaders(c, k, false, time.Time{})
	server.Abort(c, checkout.AdviseKeyed(p))
}
