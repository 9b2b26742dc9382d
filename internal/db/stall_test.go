package db

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// silentServer accepts connections and never answers, as a frozen Postgres does. Go's
// listener keeps the connections open until the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// With a stall timeout, connecting to a server that never answers fails in about that
// long, as unavailable and stalled, although the context has no deadline (the way
// checkout's claims run).
func TestStallTimeoutEndsASilentConnect(t *testing.T) {
	url := fmt.Sprintf("postgres://tekrar@%s/tekrar?sslmode=disable", silentServer(t))
	const stall = 200 * time.Millisecond
	start := time.Now()
	d, err := Open(context.WithoutCancel(context.Background()), url, 2, StallTimeout(stall))
	if err == nil {
		d.Close()
		t.Fatal("connected to a server that never answers")
	}
	if took := time.Since(start); took > 20*stall {
		t.Fatalf("gave up after %v with a stall timeout of %v", took, stall)
	}
	if !IsUnavailable(err) || !IsStalled(err) {
		t.Fatalf("error %v: unavailable %v, stalled %v", err, IsUnavailable(err), IsStalled(err))
	}
}

func TestSooner(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct{ limit, t, want time.Time }{
		{time.Time{}, now, now},
		{now.Add(-time.Second), now, now.Add(-time.Second)},
		{now.Add(time.Second), now, now},
	} {
		if got := sooner(tt.limit, tt.t); !got.Equal(tt.want) {
			t.Errorf("sooner(%v, %v) = %v, want %v", tt.limit, tt.t, got, tt.want)
		}
	}
}
