package api

import (
	"encoding/json"
	"errors"
	"net/http"
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
	if loc := location(c, res); loc != "" {
		h.Set("Location", loc)
	}
	setKeyHeaders(c, k, res.Replayed, res.ExpiresAt)
	if res.WaitedFor > 0 {
		h.Set("Preference-Applied", "wait="+strconv.Itoa(int(res.WaitedFor.Seconds())))
	}
	h.Set("Content-Length", strconv.Itoa(len(res.Body)))
	c.Status(res.Status)
	_, _ = c.Writer.Write(res.Body)
}

// location is where the resource a keyed POST created (201) is read: its id, the body's
// "id", under the collection it was posted to. Both creating routes have a GET there:
// POST /v1/orders → GET /v1/orders/{id}, POST /v1/orders/{id}/refunds → GET
// /v1/orders/{id}/refunds/{rid}. The domain stores no Location (keys completed before it
// stopped still hold the same one); it is made here, for the first answer and its replays.
func location(c *gin.Context, res checkout.Result) string {
	if res.Status != http.StatusCreated {
		return ""
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.Body, &created); err != nil || created.ID == "" {
		return ""
	}
	return c.Request.URL.Path + "/" + created.ID
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

// failRead answers a request without an Idempotency-Key (a GET, a DELETE) whose domain call
// failed, without the advice of a keyed request: retryable and safe_new_key speak of a key
// the request has not got, and Idempotent-Replayed of a replay it cannot be. Retry-After
// still comes with the code.
func (a *handlers) failRead(c *gin.Context, err error) {
	server.Abort(c, unkeyed(a.problemOf(c, err)))
}

// fail answers a keyed request that did not produce a response: a problem from the
// domain, the store being down, or a bug.
func (a *handlers) fail(c *gin.Context, k keyed, err error) {
	p := a.problemOf(c, err)
	setKeyHeaders(c, k, false, time.Time{})
	server.Abort(c, p.Advised()) // Retry-After comes with the code, from problem.Codes
}

// problemOf is the problem that answers err: the domain's own, commit_unknown,
// store_unavailable, or internal_error for a bug (logged).
func (a *handlers) problemOf(c *gin.Context, err error) *problem.Problem {
	var p *problem.Problem
	switch {
	case errors.As(err, &p):
	case errors.Is(err, db.ErrCommitUnknown):
		a.logger.Warn("commit outcome unknown", "err", err, "request_id", server.RequestID(c))
		p = checkout.CommitUnknown()
	case db.IsUnavailable(err):
		a.logger.Warn("store unavailable", "err", err, "request_id", server.RequestID(c))
		p = checkout.StoreUnavailable()
	default:
		a.logger.Error("request failed", "err", err, "request_id", server.RequestID(c))
		p = problem.Internal()
	}
	return p
}
