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

// Start starts a stripe-mock on a free port for the test and returns its base URL; it is
// killed when the test ends. Without the binary the test is skipped, or fails under
// TEKRAR_STRIPE_MOCK_REQUIRED=1.
func Start(t testing.TB) string {
	t.Helper()
	bin := Binary()
	if bin == "" {
		msg := "stripe-mock is not installed: go install github.com/stripe/stripe-mock@" + Version
		if os.Getenv(RequiredEnv) == "1" {
			t.Fatal(msg + " (" + RequiredEnv + "=1)")
		}
		t.Skip(msg)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("stripe-mock: a free port: %v", err)
	}
	cmd := exec.Command(bin, "-http-port", strconv.Itoa(port))
	out, err := os.CreateTemp(t.TempDir(), "stripe-mock-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/balance", nil)
		req.SetBasicAuth(SecretKey, "")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(out.Name())
			t.Fatalf("stripe-mock exited at start:\n%s", log)
		case <-ctx.Done():
			t.Fatalf("stripe-mock did not answer on %s within 30s", base)
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
