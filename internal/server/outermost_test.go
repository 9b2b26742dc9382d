package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// An Outermost middleware sees the status of every answer, the 500 the panic recovery
// writes and the 404 of an unknown path included, with the route pattern matched.
func TestOutermostSeesEveryAnswer(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	type seen struct {
		route  string
		status int
	}
	var got []seen
	e, err := NewEngine(slog.New(slog.DiscardHandler), Outermost(func(c *gin.Context) {
		c.Next()
		got = append(got, seen{c.FullPath(), c.Writer.Status()})
	}))
	if err != nil {
		t.Fatal(err)
	}
	e.GET("/boom/:id", func(*gin.Context) { panic("a bug") })
	for _, path := range []string{"/boom/1", "/nowhere", "/healthz"} {
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	want := []seen{{"/boom/:id", 500}, {"", 404}, {"/healthz", 200}}
	if len(got) != len(want) {
		t.Fatalf("seen %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("answer %d: seen %v, want %v", i, got[i], want[i])
		}
	}
}
