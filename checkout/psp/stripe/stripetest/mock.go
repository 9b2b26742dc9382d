// Package stripetest runs the Stripe provider's tests against Stripe's own mock server,
// stripe-mock, and puts a fault layer of tekrar's own in front of it.
//
// stripe-mock serves Stripe's API from fixtures: it checks every request against Stripe's
// OpenAPI description and answers with the fixture of the object, whatever was asked. It
// keeps no state, so it cannot show what an idempotency key does (the first answer
// replayed, a 500 saved under the key) nor what a network does (an answer lost after the
// request was served, a 429). Layer is what shows those: an http.RoundTripper that keeps
// every answer under its Idempotency-Key as Stripe does and can lose or replace answers;
// with TestCards it also answers as Stripe's test cards would where a fixture cannot (a
// confirmed PaymentIntent succeeded, or declined).
package stripetest

import (
	"context"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Version is the stripe-mock the tests are written against (.ci/run installs it).
const Version = "v0.203.0"

// SecretKey is a test-mode key stripe-mock accepts.
const SecretKey = "sk_test_123"

// RequiredEnv, set to 1, makes a missing stripe-mock a failure instead of a skip (CI).
const RequiredEnv = "TEKRAR_STRIPE_MOCK_REQUIRED"

// Binary is the path of the stripe-mock binary: on PATH, or in GOPATH's bin; "" if neither.
func Binary() string {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "stripe-mock")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// shared is the base URL of the stripe-mock Main started for the whole test binary; "" when
// none runs.
var shared string

// Main runs a package's tests with one stripe-mock for all of them (the mock keeps no
// state, so tests cannot disturb each other through it), started before and killed after;
// call it from TestMain: os.Exit(stripetest.Main(m)). Without the binary, or if it fails to
// start, each Start starts (or skips) on its own.
func Main(m *testing.M) int {
	if bin := Binary(); bin != "" {
		dir, err := os.MkdirTemp("", "stripe-mock-")
		if err == nil {
			defer os.RemoveAll(dir)
			if base, stop, err := start(bin, dir); err == nil {
				shared = base
				defer stop()
			}
		}
	}
	return m.Run()
}

// Start returns the base URL of a stripe-mock for the test: Main's, or one started on a free
// port and killed when the test ends. Without the binary the test is skipped, or fails under
// TEKRAR_STRIPE_MOCK_REQUIRED=1.
func Start(t testing.TB) string {
	t.Helper()
	if shared != "" {
		return shared
	}
	bin := Binary()
	if bin == "" {
		msg := "stripe-mock is not installed: go install github.com/stripe/stripe-mock@" + Version
		if os.Getenv(RequiredEnv) == "1" {
			t.Fatal(msg + " (" + RequiredEnv + "=1)")
		}
		t.Skip(msg)
	}
	base, stop, err := start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}

// start starts bin on a free port, its output in a file of dir, and waits until it answers.
func start(bin, dir string) (base string, stop func(), err error) {
	port, err := freePort()
	if err != nil {
		return "", nil, fmt.Errorf("stripe-mock: a free port: %w", err)
	}
	cmd := exec.Command(bin, "-http-port", strconv.Itoa(port))
	out, err := os.CreateTemp(dir, "stripe-mock-*.log")
	if err != nil {
		return "", nil, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start stripe-mock: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/balance", nil)
		req.SetBasicAuth(SecretKey, "")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, stop, nil
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(out.Name())
			return "", nil, fmt.Errorf("stripe-mock exited at start:\n%s", log)
		case <-ctx.Done():
			stop()
			return "", nil, fmt.Errorf("stripe-mock did not answer on %s within 30s", base)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
