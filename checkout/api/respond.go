package api

import (
	"bytes"
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
	id := createdID(res.Body)
	if id == "" {
		return ""
	}
	return c.Request.URL.Path + "/" + id
}

// idFirst is how tekrar's own encoding of an order or a refund (OrderView, RefundView)
// begins: "id" is the struct's first field.
var idFirst = []byte(`{"id":"`)

// createdID is the body's top-level "id" ("" for none). A body that begins as tekrar
// encodes one is read up to the id's closing quote, when the id is made of the characters
// public ids are made of (no escapes); any other is decoded whole. Decoding the whole
// stored order was 8% of tekrar's CPU while it answered replays from memory
// (TestCreatedIDReadsAsTheDecoderDoes).
func createdID(body []byte) string {
	if rest, ok := bytes.CutPrefix(body, idFirst); ok {
		if end := bytes.IndexByte(rest, '"'); end > 0 && plainID(rest[:end]) {
			return string(rest[:end])
		}
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		return ""
	}
	return created.ID
}

// plainID reports whether b holds only the characters of a public id: letters, digits, '_'.
func plainID(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
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
