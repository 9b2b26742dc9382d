package admin

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/server"
)

// A handler's unexpected error, and a panic, are the console's 500 page with the request
// id; what went wrong goes to the log under that id, never to the page.
func TestServerErrorsAreLoggedNotShown(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	e, err := server.NewEngine(logger)
	if err != nil {
		t.Fatal(err)
	}
	a := &console{Deps: Deps{Logger: logger}}
	e.GET("/admin/fails", a.handle(func(*gin.Context) error { return errors.New("secret detail of a failure") }))
	e.GET("/admin/panics", a.handle(func(*gin.Context) error { panic("secret detail of a panic") }))
	for _, tt := range []struct{ path, detail string }{
		{"/admin/fails", "secret detail of a failure"},
		{"/admin/panics", "secret detail of a panic"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			logs.Reset()
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
			rid, body := rec.Header().Get("X-Request-Id"), rec.Body.String()
			if rec.Code != http.StatusInternalServerError || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
				t.Fatalf("%d %q, want a 500 page", rec.Code, rec.Header().Get("Content-Type"))
			}
			if rid == "" || !strings.Contains(body, `<code class="request-id">`+rid+`</code>`) {
				t.Errorf("the page does not carry the request id %q: %s", rid, body)
			}
			if strings.Contains(body, tt.detail) {
				t.Error("the page shows what the log is for")
			}
			if l := logs.String(); !strings.Contains(l, tt.detail) || !strings.Contains(l, "request_id="+rid) {
				t.Errorf("the log does not have the detail under the request id: %s", l)
			}
		})
	}
}
