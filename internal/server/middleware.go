package server

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/problem"
)

const (
	requestIDKey  = "tekrar.request_id"
	logProblemKey = "tekrar.problem_code"
	problemKey    = "tekrar.problem"
	// LogClientKey is set by authentication so that the access log names the client.
	LogClientKey = "tekrar.client_id"
)

// RequestID is the id of the request being served, also sent as X-Request-Id.
func RequestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// requestID gives every request an id. A caller's X-Request-Id is kept when it is short and
// plain, so that a mobile app's own id can be followed through the logs; anything else is
// replaced, so that no client can write arbitrary text into the logs.
func requestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader("X-Request-Id")
		if !plainID(id) {
			id = fmt.Sprintf("%016x", rand.Uint64())
		}
		c.Set(requestIDKey, id)
		c.Header("X-Request-Id", id)
		c.Next()
	}
}

func plainID(s string) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			return false
		}
	}
	return true
}

// accessLog writes one line per request. It never logs headers or bodies: they carry
// secrets, card tokens and customer data.
func accessLog(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "(unmatched)"
		}
		attrs := []slog.Attr{
			slog.String("method", c.Request.Method),
			slog.String("route", route),
			slog.Int("status", c.Writer.Status()),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("request_id", RequestID(c)),
		}
		if id, ok := c.Get(LogClientKey); ok {
			attrs = append(attrs, slog.Any("client_id", id))
		}
		if code := c.GetString(logProblemKey); code != "" {
			attrs = append(attrs, slog.String("problem", code))
		}
		level := slog.LevelInfo
		if c.Writer.Status() >= 500 {
			level = slog.LevelWarn
		}
		logger.LogAttrs(c.Request.Context(), level, "request", attrs...)
	}
}

// recovery turns a panic into a 500 problem and a log line with the stack. Nothing should
// panic on input; this is the net under a bug, not a way to handle errors.
func recovery(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				logger.Error("panic serving request", "panic", fmt.Sprint(r),
					"request_id", RequestID(c), "stack", string(debug.Stack()))
				if !c.Writer.Written() {
					Abort(c, problem.Internal())
				} else {
					c.Abort()
				}
			}
		}()
		c.Next()
	}
}
