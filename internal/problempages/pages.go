// Package problempages serves a page for each problem code, where a problem's type links
// (/problems/{code}), and an index of them at /problems. The pages are public, outside the
// API and the console: they are read by the developers of clients.
package problempages

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/problem"
	"github.com/tekrar/tekrar/internal/server"
	"github.com/tekrar/tekrar/views"
)

// contentSecurity allows the style sheet and nothing else: the pages have no script.
const contentSecurity = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Register mounts the index and the pages on e.
func Register(e *gin.Engine) {
	e.GET(strings.TrimSuffix(problem.PagesPath, "/"), func(c *gin.Context) {
		vs := make([]views.ProblemView, len(problem.Codes))
		for i, s := range problem.Codes {
			vs[i] = view(s)
		}
		render(c, views.ProblemIndex(vs))
	})
	e.GET(problem.PagesPath+":code", func(c *gin.Context) {
		s, ok := problem.Lookup(problem.Code(c.Param("code")))
		if !ok {
			server.Abort(c, problem.NotFound().WithDetail("no such problem code; /problems lists them"))
			return
		}
		render(c, views.ProblemPage(view(s)))
	})
}

// view is what a page shows of a code.
func view(s problem.Spec) views.ProblemView {
	return views.ProblemView{Code: string(s.Code), Title: s.Title, Status: s.Status, Href: problem.TypeURI(s.Code),
		Doc: s.Doc, Advice: s.Advice(), Example: s.Example(), Retryable: s.Retryable, SafeNewKey: s.SafeNewKey,
		PerOccurrence: s.PerOccurrence, RetryAfter: s.RetryAfter}
}

// render writes a page, rendered to a buffer first so that an error never sends half of
// one.
func render(c *gin.Context, comp templ.Component) {
	var buf bytes.Buffer
	if err := comp.Render(c.Request.Context(), &buf); err != nil {
		_ = c.Error(fmt.Errorf("render problem page: %w", err))
		server.Abort(c, problem.Internal())
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", contentSecurity)
	h.Set("X-Content-Type-Options", "nosniff")
	c.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}
