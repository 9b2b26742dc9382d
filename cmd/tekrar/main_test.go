package main

// Process-level tests: they build the real tekrar binary once per test binary and run it as a
// user would, with environment variables, flags, signals and HTTP. Every process a test
// starts is killed when the test ends, whatever happened.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/pglocal"
)

// tekrarBin is the binary under test, built by TestMain.
var tekrarBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tekrar-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create build directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	tekrarBin = filepath.Join(dir, "tekrar")
	// Without -race: the binary is what a user runs, and it should start fast. The test
	// binary itself still runs under -race in CI.
	build := exec.Command("go", "build", "-o", tekrarBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build tekrar:", err)
		return 1
	}
	return dbtest.Main(m)
}

// childEnv is this process's environment without any tekrar setting, plus extra. A
// developer's own DATABASE_URL or TEKRAR_ADDR must not leak into a test's process.
func childEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || strings.HasPrefix(name, "TEKRAR_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// lockedBuffer collects a child's output while the child writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is one running tekrar.
type proc struct {
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{} // closed once the process has been reaped
	err    error         // cmd.Wait's result, readable after done
}

// startTekrar starts the binary with env (see childEnv) and args. stdin may be nil.
func startTekrar(t testing.TB, env []string, stdin io.Reader, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(tekrarBin, args...)
	cmd.Env = env
	cmd.Stdin = stdin
	p := &proc{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	// Started as pglocal starts Postgres, from a thread that never exits: Pdeathsig then means
	// "the test binary died", so a test killed by its timeout leaves no tekrar running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := pglocal.StartChild(cmd); err != nil {
		t.Fatalf("start tekrar %v: %v", args, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
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
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("tekrar %v did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], timeout, p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// runTekrar runs the binary to completion and returns its output and exit code.
func runTekrar(t testing.TB, env []string, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startTekrar(t, env, stdin, args...)
	code = p.wait(t, 30*time.Second)
	return p.stdout.String(), p.stderr.String(), code
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t testing.TB, env []string, stdin io.Reader, args ...string) string {
	t.Helper()
	stdout, stderr, code := runTekrar(t, env, stdin, args...)
	if code != 0 {
		t.Fatalf("tekrar %v exited %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
	}
	return stdout
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 at the time of the call.
func freePorts(t testing.TB, n int) []int {
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

func addrOf(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// newHTTPClient keeps enough idle connections that a storm reuses them instead of opening
// hundreds of new ones per round.
func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second},
	}
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// send makes one request; headers are name, value pairs and empty values are skipped.
func send(c *http.Client, method, url, secret string, body []byte, headers ...string) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return response{}, err
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
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{res.StatusCode, res.Header, b}, nil
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
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for _, path := range []string{"/healthz", "/readyz"} {
		for {
			r, err := send(c, "GET", base+path, "", nil)
			if err == nil && r.Status == 200 {
				break
			}
			if p.exited() {
				t.Fatalf("tekrar %v exited (%v) before %s answered\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], p.err, path, p.stdout, p.stderr)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s%s not ready within %v (last: %v %d %s)\nstderr:\n%s", base, path, timeout, err, r.Status, r.Body, p.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// waitUntil polls cond until it holds or the deadline passes. It waits for an effect; it
// never times one.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// openDB connects to a test database for assertions.
func openDB(t testing.TB, url string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Connect("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func countRows(t testing.TB, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := db.GetContext(ctx, &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// newClientSecret creates an API client with `tekrar clients create` and returns the secret,
// checking that it is printed alone on one line.
func newClientSecret(t testing.TB, dbURL, name string) string {
	t.Helper()
	stdout := mustRun(t, childEnv("DATABASE_URL="+dbURL), nil, "clients", "create", name)
	if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("clients create printed %q, want exactly one line", stdout)
	}
	secret := strings.TrimSuffix(stdout, "\n")
	if !strings.HasPrefix(secret, "tekrar_sk_") || strings.ContainsAny(secret, " \t\r") {
		t.Fatalf("clients create printed %q, want a tekrar_sk_ secret alone", stdout)
	}
	return secret
}

// orderJSONBody is a valid POST /v1/orders body of one item for amount, paid with token.
func orderJSONBody(amount int64, token string) []byte {
	return []byte(fmt.Sprintf(`{"currency":"TRY","items":[{"sku":"A","name":"A","quantity":1,"unit_amount":%d}],"amount":%d,"payment":{"card_token":%q}}`,
		amount, amount, token))
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
