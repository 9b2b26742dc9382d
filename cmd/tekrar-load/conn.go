package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// conn is one client's keep-alive HTTP/1.1 connection. It writes each request with one
// write and reads the response with a small parser instead of net/http's client: the load
// generator shares the machine's two cores with the server and Postgres, as pgbench does
// beside the ceiling, so the less it spends per request the more of the machine measures
// tekrar. It understands what tekrar sends (a status line, headers, a Content-Length body)
// and nothing else; anything it cannot parse is an error, and the connection is redialled.
type conn struct {
	addr, host, path string
	c                net.Conn
	r                *bufio.Reader
	req              []byte
}

func newConn(base string) (*conn, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http://host:port", base)
	}
	return &conn{addr: u.Host, host: u.Host, path: u.Path + "/v1/orders"}, nil
}

// reply is what the load generator checks of a response.
type reply struct {
	status   int
	replayed bool
}

// post sends one keyed order and reads its response. On any error the connection is
// closed, so that the next request starts on a fresh one.
func (c *conn) post(secret, key string, body []byte) (reply, error) {
	if c.c == nil {
		nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			return reply{}, err
		}
		c.c, c.r = nc, bufio.NewReaderSize(nc, 8192)
	}
	c.req = append(c.req[:0], "POST "...)
	c.req = append(c.req, c.path...)
	c.req = append(c.req, " HTTP/1.1\r\nHost: "...)
	c.req = append(c.req, c.host...)
	c.req = append(c.req, "\r\nUser-Agent: tekrar-load\r\nContent-Type: application/json\r\nAuthorization: Bearer "...)
	c.req = append(c.req, secret...)
	c.req = append(c.req, "\r\nIdempotency-Key: "...)
	c.req = append(c.req, key...)
	c.req = append(c.req, "\r\nContent-Length: "...)
	c.req = strconv.AppendInt(c.req, int64(len(body)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, body...)
	_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.c.Write(c.req); err != nil {
		c.close()
		return reply{}, err
	}
	rep, err := c.read()
	if err != nil {
		c.close()
	}
	return rep, err
}

func (c *conn) read() (reply, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return reply{}, err
	}
	// "HTTP/1.1 201 Created\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return reply{}, fmt.Errorf("status line %q", line)
	}
	var rep reply
	if rep.status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return reply{}, fmt.Errorf("status line %q", line)
	}
	length, closing := -1, false
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return reply{}, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return reply{}, fmt.Errorf("header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return reply{}, fmt.Errorf("content length %q", value)
			}
		case bytes.EqualFold(name, []byte("Idempotent-Replayed")):
			rep.replayed = string(value) == "true"
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return reply{}, errors.New("chunked response: not expected from tekrar")
		}
	}
	if length < 0 {
		return reply{}, errors.New("response without Content-Length")
	}
	if _, err := c.r.Discard(length); err != nil {
		return reply{}, err
	}
	if closing {
		c.close()
	}
	return rep, nil
}

func (c *conn) close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c, c.r = nil, nil
	}
}
