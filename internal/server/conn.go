package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/problem"
)

// net/http reads and refuses some requests before any handler sees them, and hides one
// thing a handler needs: a request with both Content-Length and Transfer-Encoding is
// served (chunked wins) with Content-Length deleted from its header, on a connection it
// keeps open. RFC 9112 section 6.1 says such a message "ought to be handled as an error"
// and the connection MUST be closed: a proxy in front may have framed it by
// Content-Length, so the rest of the connection may be another request smuggled in.
//
// So every connection goes through httpConn, which watches the request heads it reads
// for the two headers together, and rewrites net/http's own plain-text refusals into
// problem details.

type connKey struct{}

// NewHTTPServer returns the http.Server that serves h: its limits, and the connection
// context that lets refuseSmuggling see the connection. Serve it on WrapListener's
// listener. Tests build theirs here too, so that what is tested is what runs.
func NewHTTPServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if hc, ok := c.(*httpConn); ok {
				return context.WithValue(ctx, connKey{}, hc)
			}
			return ctx
		},
	}
	return srv
}

// MaxHeaderBytes bounds a request's head; beyond it (plus net/http's 4 KiB of slack) the
// answer is 431.
const MaxHeaderBytes = 64 << 10

// WrapListener makes every accepted connection an httpConn.
func WrapListener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &httpConn{Conn: c}, nil
}

// httpConn scans what it reads line by line. A head ends at an empty line; a head that
// holds Content-Length and Transfer-Encoding marks the connection. The scan does not know
// where bodies end, so a body holding both names on lines of their own (and an empty line
// after them) marks it too: only a client that sends such a body over HTTP/1.1 framing
// meant for something else is refused, and it loses nothing it could rightly expect.
type httpConn struct {
	net.Conn
	conflict atomic.Bool // a head had both Content-Length and Transfer-Encoding

	line   []byte // the start of the current line, lower-cased, at most lineKeep
	cl, te bool   // seen in the current head
}

const lineKeep = len("transfer-encoding:")

func (c *httpConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.scan(b[:n])
	return n, err
}

func (c *httpConn) scan(b []byte) {
	for _, ch := range b {
		if ch != '\n' {
			if len(c.line) < lineKeep && ch != '\r' {
				if 'A' <= ch && ch <= 'Z' {
					ch += 'a' - 'A'
				}
				c.line = append(c.line, ch)
			}
			continue
		}
		switch {
		case len(c.line) == 0: // the empty line: the head is over
			if c.cl && c.te {
				c.conflict.Store(true)
			}
			c.cl, c.te = false, false
		case bytes.HasPrefix(c.line, []byte("content-length:")):
			c.cl = true
		case bytes.HasPrefix(c.line, []byte("transfer-encoding:")):
			c.te = true
		}
		c.line = c.line[:0]
	}
}

// netHTTPRefusal is how net/http writes the refusals it makes before routing (431, 501,
// 505 and 400 for a malformed request line or header): one write, a status line, these
// two headers and a plain-text body. A handler's response always has a Date header, so it
// never matches.
var netHTTPRefusal = regexp.MustCompile(`^HTTP/1\.1 ([45]\d\d) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r\n]*)$`)

// protocolCodes are the problem codes of net/http's refusals, by status.
var protocolCodes = map[int]*problem.Problem{
	http.StatusBadRequest:                  problem.Of(problem.CodeMalformedRequest),
	http.StatusRequestHeaderFieldsTooLarge: problem.Of(problem.CodeHeadersTooLarge),
	http.StatusNotImplemented:              problem.Of(problem.CodeTransferEncodingNotSupported),
	http.StatusHTTPVersionNotSupported:     problem.Of(problem.CodeHTTPVersionNotSupported),
}

func (c *httpConn) Write(b []byte) (int, error) {
	if m := netHTTPRefusal.FindSubmatch(b); m != nil {
		status, _ := strconv.Atoi(string(m[1]))
		if p, ok := protocolCodes[status]; ok {
			q := *p
			q.Detail = string(m[2]) // net/http's text names the fault, never the request's bytes
			body := q.Body("")
			resp := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"+
				"X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
				status, http.StatusText(status), problem.ContentType, len(body))
			if _, err := c.Conn.Write(append([]byte(resp), body...)); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

// refuseSmuggling answers 400 and closes the connection when the request's head had both
// Content-Length and Transfer-Encoding (see httpConn). Every later request on that
// connection would be refused too; closing it leaves none.
func refuseSmuggling(c *gin.Context) {
	if hc, ok := c.Request.Context().Value(connKey{}).(*httpConn); ok && hc.conflict.Load() {
		c.Header("Connection", "close")
		Abort(c, problem.Of(problem.CodeMalformedRequest).WithTitle("Request framing is ambiguous").
			WithDetail("send either Content-Length or Transfer-Encoding, not both"))
		return
	}
	c.Next()
}
