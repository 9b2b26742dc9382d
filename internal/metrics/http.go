package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout/api"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

// The outcomes of a keyed request (tekrar_idempotency_requests_total's outcome label).
const (
	OutcomeFirstExecution = "first_execution" // executed: a first arrival, or a retry that took over unfinished work
	OutcomeReplay         = "replay"          // answered with the stored response
	OutcomeWaited         = "waited"          // waited (Prefer: wait) for a concurrent request with its key
	OutcomeReused         = "reused"          // the key came with another request (idempotency_key_reused)
	OutcomeInUse          = "in_use"          // the key was being worked on (idempotency_key_in_use)
	OutcomeLateRetry      = "late_retry"      // the same request after its key expired (idempotency_key_expired)
	OutcomeExpired        = "expired"         // another request under an expired key (idempotency_key_expired, safe_new_key)
	OutcomeAttention      = "needs_attention" // the key is with an operator (needs_attention)
	OutcomeRefused        = "refused"         // refused before execution: no or bad key, bad body, validation
)

// Middleware records every request's route pattern, method, status and duration, and the
// idempotency outcome of every keyed request, from what the API already answered: the
// Idempotent-Replayed and Preference-Applied headers and the problem's code.
func (m *Metrics) Middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched" // never the raw path: it may hold a key or an id
		}
		status := c.Writer.Status()
		m.requests.WithLabelValues(route, method(c.Request.Method), strconv.Itoa(status)).Observe(time.Since(start).Seconds())
		if outcome := idempotencyOutcome(c); outcome != "" {
			client := "none"
			if id, ok := c.Get(server.LogClientKey); ok {
				if n, ok := id.(int64); ok {
					client = strconv.FormatInt(n, 10)
				}
			}
			m.idempotency.WithLabelValues(client, outcome).Inc()
		}
	}
}

// idempotencyOutcome classifies a keyed request's answer; "" for a request that is not a
// keyed POST (it has no Idempotent-Replayed header).
func idempotencyOutcome(c *gin.Context) string {
	h := c.Writer.Header()
	replayed := h.Get("Idempotent-Replayed")
	if replayed == "" {
		return ""
	}
	if p := server.ProblemOf(c); p != nil {
		switch p.Code {
		case problem.CodeIdempotencyKeyReused:
			return OutcomeReused
		case problem.CodeIdempotencyKeyInUse:
			return OutcomeInUse
		case problem.CodeNeedsAttention:
			return OutcomeAttention
		case problem.CodeIdempotencyKeyExpired:
			if safe, _ := p.Extensions["safe_new_key"].(bool); safe {
				return OutcomeExpired
			}
			return OutcomeLateRetry
		}
	}
	switch {
	case replayed == "true" && h.Get("Preference-Applied") == "":
		return OutcomeReplay
	case h.Get("Preference-Applied") != "":
		return OutcomeWaited
	case !c.GetBool(api.ExecutedKey):
		return OutcomeRefused
	}
	return OutcomeFirstExecution
}

// method keeps the method label to the methods HTTP defines: a client may send any token.
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}
