package db

import (
	"context"
	"errors"
	"net"
	"os"
	"time"
)

// A frozen Postgres (stopped by SIGSTOP, a hung host, a network partition that drops
// packets) accepts connections and reads queries into its socket buffers but never answers.
// A context deadline does not help then: lib/pq answers a cancelled context by sending a
// cancel request on a new connection, which hangs the same way, and only returns when the
// query's own read does. So the bound is set where the read happens: every connection's
// reads and writes time out when the server makes no progress for the stall timeout, and
// lib/pq then marks the connection bad (database/sql discards it) and returns the network
// error, which IsUnavailable recognises. The cancel requests dial through the same dialer,
// so they end too.

// stallDialer dials connections whose reads and writes give up after timeout without
// progress.
type stallDialer struct{ timeout time.Duration }

func (d stallDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

func (d stallDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

func (d stallDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.timeout}
	c, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, timeout: d.timeout}, nil
}

// stallConn arms a fresh deadline before every read and write, so a result that streams
// slowly is fine and a silent server is not. A deadline the driver sets itself (lib/pq's
// connect_timeout) still applies when it is sooner. Reads and writes of one connection
// come from one goroutine at a time (lib/pq's), and so do the Set*Deadline calls.
type stallConn struct {
	net.Conn
	timeout             time.Duration
	readLimit, writeLim time.Time // set by the driver; zero: none
}

func (c *stallConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(sooner(c.readLimit, time.Now().Add(c.timeout))); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	c.closeOnTimeout(err)
	return n, err
}

func (c *stallConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(sooner(c.writeLim, time.Now().Add(c.timeout))); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(b)
	c.closeOnTimeout(err)
	return n, err
}

// closeOnTimeout closes a connection whose server stopped answering: the protocol state is
// unknown (the answer to the abandoned query may still arrive), so it must never be used
// again, and closing lets the server end the session once it wakes.
func (c *stallConn) closeOnTimeout(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		_ = c.Conn.Close()
	}
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.readLimit, c.writeLim = t, t
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetReadDeadline(t time.Time) error {
	c.readLimit = t
	return c.Conn.SetReadDeadline(t)
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.writeLim = t
	return c.Conn.SetWriteDeadline(t)
}

func sooner(limit, t time.Time) time.Time {
	if !limit.IsZero() && limit.Before(t) {
		return limit
	}
	return t
}

// IsStalled reports whether err is a database call that gave up because the server did not
// answer in time. Calling again at once would wait as long again.
func IsStalled(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
