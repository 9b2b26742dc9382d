package server

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/internal/problem"
)

// MaxFormBytes bounds a form body. The console's forms (sign-in, refund, release, expire)
// are a few hundred bytes; without a bound net/http reads up to 10 MB of one into memory,
// and the sign-in form is open to anyone who can reach the console.
const MaxFormBytes = 64 << 10

// PlainText refuses a request whose path, query or form holds text that is not UTF-8 or
// holds a NUL character. Postgres's text cannot store either and refuses them even as a
// search term, so a key page, a console search or a sign-in with one would otherwise fail
// in the database and answer 500. JSON bodies are checked where they are decoded. It reads
// a form body itself, up to MaxFormBytes (413 beyond). advise, if not nil, adds what the
// client may do next to the problem.
func PlainText(advise func(*gin.Context, *problem.Problem) *problem.Problem) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		ok := pgtext.Valid(r.URL.Path) && plainValues(r.URL.RawQuery == "", r.URL.Query)
		if ok && r.Method == http.MethodPost {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
				r.Body = http.MaxBytesReader(c.Writer, r.Body, MaxFormBytes)
				err := r.ParseForm()
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					abortAdvised(c, advise, problem.Of(problem.CodeBodyTooLarge).
						WithDetail(fmt.Sprintf("a form may be at most %d bytes", MaxFormBytes)))
					return
				}
				// A form that does not parse otherwise is the handler's to refuse.
				ok = plainValues(err != nil, func() url.Values { return r.PostForm })
			}
		}
		if !ok {
			abortAdvised(c, advise, problem.Of(problem.CodeMalformedRequest).WithTitle("Request holds text that cannot be stored").
				WithDetail("the path, query or form is not valid UTF-8 or holds a NUL character"))
			return
		}
		c.Next()
	}
}

func abortAdvised(c *gin.Context, advise func(*gin.Context, *problem.Problem) *problem.Problem, p *problem.Problem) {
	if advise != nil {
		p = advise(c, p)
	}
	Abort(c, p)
}

func plainValues(skip bool, values func() url.Values) bool {
	if skip {
		return true
	}
	for k, vs := range values() {
		if !pgtext.Valid(k) {
			return false
		}
		for _, v := range vs {
			if !pgtext.Valid(v) {
				return false
			}
		}
	}
	return true
}
