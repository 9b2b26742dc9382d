package server

import (
	"mime"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/internal/problem"
)

// PlainText refuses a request whose path, query or form holds text that is not UTF-8 or
// holds a NUL character. Postgres's text cannot store either and refuses them even as a
// search term, so a key page, a console search or a sign-in with one would otherwise fail
// in the database and answer 500. JSON bodies are checked where they are decoded. advise,
// if not nil, adds what the client may do next to the problem.
func PlainText(advise func(*gin.Context, *problem.Problem) *problem.Problem) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		ok := pgtext.Valid(r.URL.Path) && plainValues(r.URL.RawQuery == "", r.URL.Query)
		if ok && r.Method == http.MethodPost {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
				// A form that does not parse is the handler's to refuse, as before.
				ok = plainValues(r.ParseForm() != nil, func() url.Values { return r.PostForm })
			}
		}
		if !ok {
			p := problem.New(http.StatusBadRequest, "malformed_request", "Request holds text that cannot be stored").
				WithDetail("the path, query or form is not valid UTF-8 or holds a NUL character")
			if advise != nil {
				p = advise(c, p)
			}
			Abort(c, p)
			return
		}
		c.Next()
	}
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
