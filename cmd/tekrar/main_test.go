package main

// Process-level tests: they build the real tekrar binary once per test binary (proctest.Main)
// and run it as a user would, with environment variables, flags, signals and HTTP. Every process a test
// starts is killed when the test ends, whatever happened.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/proctest"
)

func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }

// The process helpers are proctest's, which cmd/tekrar/failover's tests share; these names
// are the ones this package's tests were written with.
var (
	childEnv        = proctest.ChildEnv
	runTekrar       = proctest.Run
	mustRun         = proctest.MustRun
	freePorts       = proctest.FreePorts
	addrOf          = proctest.Addr
	newHTTPClient   = proctest.NewHTTPClient
	send            = proctest.Send
	waitUntil       = proctest.WaitUntil
	openDB          = proctest.OpenDB
	countRows       = proctest.CountRows
	newClientSecret = proctest.NewClientSecret
	orderJSONBody   = proctest.OrderJSONBody
)

type response = proctest.Response

// proc is one running tekrar, a proctest.Proc with the fields this package's tests read.
type proc struct {
	*proctest.Proc
	cmd    *exec.Cmd
	stdout *proctest.Output
	stderr *proctest.Output
	done   chan struct{} // closed once the process has been reaped and err is set
	err    error         // cmd.Wait's result, readable after done
}

// startTekrar starts the binary with env (see childEnv) and args. stdin may be nil.
func startTekrar(t testing.TB, env []string, stdin io.Reader, args ...string) *proc {
	t.Helper()
	pp := proctest.Start(t, env, stdin, args...)
	p := &proc{Proc: pp, cmd: pp.Cmd, stdout: pp.Stdout, stderr: pp.Stderr, done: make(chan struct{})}
	go func() {
		<-pp.Done()
		p.err = pp.Err
		close(p.done)
	}()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits at most timeout for the process to exit and returns its exit code (-1 when a
// signal killed it). It fails the test, with the process's output, on timeout.
func (p *proc) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	code := p.Wait(t, timeout)
	<-p.done
	return code
}

func (p *proc) signal(t testing.TB, sig os.Signal) {
	t.Helper()
	p.Signal(t, sig)
}

func mustSend(t testing.TB, c *http.Client, method, url, secret string, body []byte, headers ...string) response {
	t.Helper()
	r, err := send(c, method, url, secret, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// waitReady polls /healthz and /readyz of base until both answer 200. It fails at once if
// the process exits, and after timeout otherwise.
func waitReady(t testing.TB, p *proc, base string, timeout time.Duration) {
	t.Helper()
	proctest.WaitReady(t, p.Proc, base, timeout)
}

// problemOf checks that r is a problem+json response with this status and code.
func problemOf(t testing.TB, r response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.Body)
	}
	if p["code"] != code || p["status"] != float64(status) {
		t.Fatalf("problem %s, want code %s status %d", r.Body, code, status)
	}
	return p
}

// oneLine checks that s, trimmed, is one non-empty line without a Go stack trace.
func oneLine(t testing.TB, what, s string) string {
	t.Helper()
	line := strings.TrimSpace(s)
	if line == "" || strings.Contains(line, "\n") {
		t.Fatalf("%s is not exactly one line:\n%s", what, s)
	}
	for _, bad := range []string{"goroutine ", "panic:", ".go:"} {
		if strings.Contains(line, bad) {
			t.Fatalf("%s looks like a stack trace (%q): %s", what, bad, line)
		}
	}
	return line
}

// gone reports whether no process has this pid. A zombie still has one; reap tries to
// collect it when it is our child (see TestDevSIGKILLLeavesNoPostgres).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
