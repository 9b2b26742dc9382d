package api

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
)

const clientKey = "tekrar.client"

// authenticate resolves "Authorization: Bearer <secret>" to a client, or answers 401.
// Two Authorization headers are 401 too: which one a proxy, a log or tekrar reads first
// differs, so no request may carry two credentials and be served as one of them.
func authenticate(auth *clients.Authenticator, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		vals := c.Request.Header.Values("Authorization")
		if len(vals) != 1 {
			unauthorized(c)
			return
		}
		secret, ok := bearer(vals[0])
		if !ok {
			unauthorized(c)
			return
		}
		client, err := auth.Authenticate(c.Request.Context(), secret)
		switch {
		case errors.Is(err, clients.ErrUnknown):
			unauthorized(c)
			return
		case err != nil:
			logger.Warn("authenticate: client lookup failed", "err", err, "request_id", server.RequestID(c))
			if db.IsUnavailable(err) {
				abortUnavailable(c)
			} else {
				server.Abort(c, problem.Internal())
			}
			return
		}
		c.Set(clientKey, client)
		c.Set(server.LogClientKey, client.ID)
		c.Next()
	}
}

func unauthorized(c *gin.Context) {
	c.Header("WWW-Authenticate", `Bearer realm="tekrar"`)
	server.Abort(c, keyedAdvice(c, problem.Unauthorized()))
}

// keyedAdvice adds to a problem answered before the key was read what the client may do
// next, when the request carries a key.
func keyedAdvice(c *gin.Context, p *problem.Problem) *problem.Problem {
	if c.GetHeader("Idempotency-Key") != "" {
		return p.Advised()
	}
	return unkeyed(p)
}

// unkeyed is p as answered to a request without an Idempotency-Key: no retryable or
// safe_new_key (they speak of a key it has not got), and no detail that tells it to retry
// "with the same key".
func unkeyed(p *problem.Problem) *problem.Problem {
	q := p.Unadvised()
	if q.Code == problem.CodeStoreUnavailable {
		q.Detail = "the database is unavailable; send the request again after Retry-After seconds"
	}
	return q
}

// abortUnavailable fails closed: the client retries later, nothing was executed.
func abortUnavailable(c *gin.Context) {
	server.Abort(c, keyedAdvice(c, checkout.StoreUnavailable()))
}

// bearer extracts the token of an RFC 6750 Bearer header. The scheme is case-insensitive.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// client is the authenticated client of the request.
func client(c *gin.Context) clients.Client {
	return c.MustGet(clientKey).(clients.Client)
}
