package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// /readyz is 200 only when the check passes: a standby is 503 store_unavailable saying it is
// read-only, an unreachable or frozen database is 503 without that detail. The checks here
// stand for Writable's answers, which TestSeveralHosts in internal/pglocal takes from a real
// primary and a real standby.
func TestReadyAnswersForAWritablePrimaryOnly(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	frozen := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	for _, tc := range []struct {
		name     string
		check    func(context.Context) error
		status   int
		readOnly bool
	}{
		{"primary", func(context.Context) error { return nil }, http.StatusOK, false},
		{"standby", func(context.Context) error { return ErrReadOnly }, http.StatusServiceUnavailable, true},
		{"unreachable", func(context.Context) error { return errors.New("dial: connection refused") }, http.StatusServiceUnavailable, false},
		{"frozen", frozen, http.StatusServiceUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEngine(slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			e.GET("/readyz", Ready(slog.New(slog.DiscardHandler), 50*time.Millisecond, tc.check))
			w := httptest.NewRecorder()
			e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			body := w.Body.String()
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, body)
			}
			if tc.status != http.StatusOK && !strings.Contains(body, `"store_unavailable"`) {
				t.Errorf("body %s, want code store_unavailable", body)
			}
			if got := strings.Contains(body, "read-only"); got != tc.readOnly {
				t.Errorf("body %s: says read-only %v, want %v", body, got, tc.readOnly)
			}
		})
	}
}
