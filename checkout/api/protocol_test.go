package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/apptest"
)

// rawConn is a client connection written byte for byte, for requests that net/http's
// client would normalise or refuse to send.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t testing.TB, e *apptest.Env) *rawConn {
	t.Helper()
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// do writes req (lines joined with CRLF; the caller ends the header block) and reads one
// response.
func (c *rawConn) do(req string) apptest.Response {
	c.t.Helper()
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.conn, req); err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("reading the response to %q: %v", req, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return apptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// closed reports whether the server closed the connection (it reads EOF within a second).
func (c *rawConn) closed() bool {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// crlf joins header lines into a request head, ending it.
func crlf(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n\r\n" }

// Two Authorization headers are refused whatever their order and whichever is valid: no
// request is served as one of two credentials.
func TestTwoAuthorizationHeaders(t *testing.T) {
	e := apptest.New(t)
	other, _ := e.NewClient(t, "other app")
	for _, tt := range []struct{ name, first, second string }{
		{"valid then unknown", e.Secret, "tekrar_sk_nope"},
		{"unknown then valid", "tekrar_sk_nope", e.Secret},
		{"two clients", e.Secret, other},
		{"the same twice", e.Secret, e.Secret},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, e)
			r := c.do(crlf("GET /v1/client HTTP/1.1", "Host: tekrar", "Authorization: Bearer "+tt.first, "Authorization: Bearer "+tt.second))
			problemOf(t, r, 401, "unauthorized")
			if r.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// One header still authenticates, on the same kind of connection.
	c := dialRaw(t, e)
	if r := c.do(crlf("GET /v1/client HTTP/1.1", "Host: tekrar", "Authorization: Bearer "+e.Secret)); r.Status != 200 {
		t.Fatalf("one Authorization header: %d %s", r.Status, r.Body)
	}
}

// Every /v1 answer, successes, replays and every kind of problem, forbids caching: an
// order or a stored response must not be kept by a proxy or served to someone else.
func TestV1ResponsesAreNotStored(t *testing.T) {
	e := apptest.New(t)
	body := orderBody(9000, "tok_visa")
	created := postOrder(t, e, e.Secret, "k-cache", body)
	if created.Status != 201 {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	id := decodeOrder(t, created).ID
	tests := []struct {
		name string
		r    apptest.Response
	}{
		{"created", created},
		{"replayed", postOrder(t, e, e.Secret, "k-cache", body)},
		{"reused key", postOrder(t, e, e.Secret, "k-cache", orderBody(100, "tok_visa"))},
		{"validation", postOrder(t, e, e.Secret, "k-cache-bad", []byte(`{}`))},
		{"no key", e.Do(t, "POST", "/v1/orders", e.Secret, body)},
		{"unauthorized", e.Do(t, "GET", "/v1/client", "", nil)},
		{"whoami", e.Do(t, "GET", "/v1/client", e.Secret, nil)},
		{"order", e.Do(t, "GET", "/v1/orders/"+id, e.Secret, nil)},
		{"order not found", e.Do(t, "GET", "/v1/orders/999999", e.Secret, nil)},
		{"list", e.Do(t, "GET", "/v1/orders?customer_id=cus_42", e.Secret, nil)},
		{"key status", e.Do(t, "GET", "/v1/idempotency-keys/k-cache", e.Secret, nil)},
		{"refund", e.Do(t, "POST", "/v1/orders/"+id+"/refunds", e.Secret, []byte(`{"amount":100}`), "Idempotency-Key", "k-cache-refund")},
		{"unknown route", e.Do(t, "GET", "/v1/nothing-here", e.Secret, nil)},
		{"wrong method", e.Do(t, "DELETE", "/v1/orders", e.Secret, nil)},
		{"malformed path", e.Do(t, "GET", "/v1/idempotency-keys/a%00b", e.Secret, nil)},
		{"readiness", e.Do(t, "GET", "/readyz", "", nil)},
	}
	for _, tt := range tests {
		if got := tt.r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s (%d): Cache-Control %q, want no-store", tt.name, tt.r.Status, got)
		}
	}
	if tests[1].r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the replay was not a replay: %v", tests[1].r.Header)
	}
	// Static files may be cached.
	entries, err := os.ReadDir("../../static/css")
	if err != nil || len(entries) == 0 {
		t.Fatalf("static files: %v", err)
	}
	r := e.Do(t, "GET", "/static/css/"+entries[0].Name(), "", nil)
	if r.Status != 200 || r.Header.Get("Cache-Control") == "no-store" {
		t.Errorf("static %s: %d Cache-Control %q", entries[0].Name(), r.Status, r.Header.Get("Cache-Control"))
	}
}

// chunked encodes body as one chunk and the last chunk.
func chunked(body []byte) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}

// A request with both Content-Length and Transfer-Encoding is refused with 400 and its
// connection closed, in any order and spelling of the two; a proxy in front may have
// framed it by Content-Length, so whatever follows on the connection may be a request
// smuggled past it. A chunked request alone is served on a kept-alive connection.
func TestContentLengthWithTransferEncoding(t *testing.T) {
	e := apptest.New(t)
	body := orderBody(9000, "tok_visa")
	head := func(key string, framing ...string) string {
		return crlf(append([]string{"POST /v1/orders HTTP/1.1", "Host: tekrar", "Authorization: Bearer " + e.Secret,
			"Idempotency-Key: " + key, "Content-Type: application/json"}, framing...)...)
	}
	for _, tt := range []struct{ name, req string }{
		{"length then chunked", head("k-cl-te", "Content-Length: 4", "Transfer-Encoding: chunked") + chunked(body)},
		{"chunked then length", head("k-te-cl", "Transfer-Encoding: chunked", "Content-Length: 4") + chunked(body)},
		{"other spelling", head("k-te-cl-case", "transfer-encoding: chunked", "CONTENT-LENGTH: 4") + chunked(body)},
		{"the length of the chunked body", head("k-cl-te-len", fmt.Sprintf("Content-Length: %d", len(chunked(body))), "Transfer-Encoding: chunked") + chunked(body)},
		{"a GET", crlf("GET /v1/client HTTP/1.1", "Host: tekrar", "Authorization: Bearer "+e.Secret, "Content-Length: 0", "Transfer-Encoding: chunked") + "0\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, e)
			// What a proxy that framed by Content-Length would take for a second request.
			r := c.do(tt.req + crlf("GET /v1/client HTTP/1.1", "Host: tekrar", "Authorization: Bearer "+e.Secret))
			problemOf(t, r, 400, "malformed_request")
			if !c.closed() {
				t.Fatal("the connection was kept open")
			}
		})
	}
	if n := count(t, e, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("%d keys stored by refused requests", n)
	}
	// Chunked alone is fine, and the connection serves the next request.
	c := dialRaw(t, e)
	if r := c.do(head("k-chunked", "Transfer-Encoding: chunked") + chunked(body)); r.Status != 201 {
		t.Fatalf("chunked order: %d %s", r.Status, r.Body)
	}
	if r := c.do(head("k-length", fmt.Sprintf("Content-Length: %d", len(body))) + string(body)); r.Status != 201 {
		t.Fatalf("then an order with Content-Length on the same connection: %d %s", r.Status, r.Body)
	}
}

// The refusals net/http makes before tekrar sees the request are problem details too, and
// close the connection.
func TestProtocolRefusalsAreProblems(t *testing.T) {
	e := apptest.New(t)
	for _, tt := range []struct {
		name, req string
		status    int
		code      string
	}{
		{"headers too large", crlf("GET /v1/client HTTP/1.1", "Host: tekrar", "X-Big: "+strings.Repeat("a", 80<<10)), 431, "headers_too_large"},
		{"unknown transfer encoding", crlf("POST /v1/orders HTTP/1.1", "Host: tekrar", "Transfer-Encoding: gzip"), 501, "transfer_encoding_not_supported"},
		{"two transfer encodings", crlf("POST /v1/orders HTTP/1.1", "Host: tekrar", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked"), 501, "transfer_encoding_not_supported"},
		{"HTTP version", crlf("GET /v1/client HTTP/3.0", "Host: tekrar"), 505, "http_version_not_supported"},
		{"control byte in a header", crlf("GET /v1/client HTTP/1.1", "Host: tekrar", "X-Bad: a\x01b"), 400, "malformed_request"},
		{"space in a header name", crlf("GET /v1/client HTTP/1.1", "Host: tekrar", "X Bad: a"), 400, "malformed_request"},
		{"no Host", crlf("GET /v1/client HTTP/1.1"), 400, "malformed_request"},
		{"two Content-Lengths", crlf("POST /v1/orders HTTP/1.1", "Host: tekrar", "Content-Length: 1", "Content-Length: 2"), 400, "malformed_request"},
		{"malformed request line", crlf("GET  HTTP/1.1", "Host: tekrar"), 400, "malformed_request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, e)
			r := c.do(tt.req)
			p := problemOf(t, r, tt.status, tt.code)
			if p["detail"] == "" || r.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("problem %v, Cache-Control %q", p, r.Header.Get("Cache-Control"))
			}
			if !c.closed() {
				t.Fatal("the connection was kept open")
			}
		})
	}
}
