package proctest

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"
)

// FreePorts returns n distinct TCP ports free on 127.0.0.1 at the time of the call.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // held until all are picked, so that they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// Addr is the loopback address of port.
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// NewHTTPClient keeps enough idle connections that a storm reuses them instead of opening
// hundreds of new ones per round.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second},
	}
}

// Response is an HTTP answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Send makes one request; headers are name, value pairs and empty values are skipped.
func Send(c *http.Client, method, url, secret string, body []byte, headers ...string) (Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return Response{}, err
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := c.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{res.StatusCode, res.Header, b}, nil
}

// WaitReady polls /healthz and /readyz of base until both answer 200. It fails at once if
// the process exits, and after timeout otherwise.
func WaitReady(t testing.TB, p *Proc, base string, timeout time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for _, path := range []string{"/healthz", "/readyz"} {
		for {
			r, err := Send(c, "GET", base+path, "", nil)
			if err == nil && r.Status == 200 {
				break
			}
			if p.Exited() {
				t.Fatalf("tekrar %v exited (%v) before %s answered\nstdout:\n%s\nstderr:\n%s", p.Cmd.Args[1:], p.Err, path, p.Stdout, p.Stderr)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s%s not ready within %v (last: %v %d %s)\nstderr:\n%s", base, path, timeout, err, r.Status, r.Body, p.Stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// WaitUp polls base+path until it answers (anything below 500), failing at once if p exits.
func WaitUp(t testing.TB, p *Proc, base, path string, timeout time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: time.Second}
	WaitUntil(t, timeout, base+path, func() bool {
		if p.Exited() {
			t.Fatalf("tekrar %v exited (%v)\nstderr:\n%s", p.Cmd.Args[1:], p.Err, p.Stderr)
		}
		r, err := Send(c, "GET", base+path, "", nil)
		return err == nil && r.Status < 500
	})
}

// Ready reports whether base's /readyz answers 200.
func Ready(base string) bool {
	c := &http.Client{Timeout: time.Second}
	r, err := Send(c, "GET", base+"/readyz", "", nil)
	return err == nil && r.Status == 200
}

// WaitUntil polls cond until it holds or the deadline passes. It waits for an effect; it
// never times one.
func WaitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sleep sleeps for d, or until ctx ends, whose error it then returns.
func Sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// EnvSize reads a harness's size from the environment variable name, or def when it is
// unset: the defaults keep CI short, and a longer run sets more.
func EnvSize(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}
