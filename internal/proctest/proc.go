package proctest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/pglocal"
)

// bin is the binary under test, built by Main.
var bin string

// Main builds the tekrar binary, runs the tests (through dbtest.Main, which stops the test
// database server afterwards) and removes the binary. A package's TestMain calls it:
//
//	func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tekrar-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create build directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "tekrar")
	// Without -race: the binary is what a user runs, and it should start fast. The test
	// binary itself still runs under -race in CI.
	build := exec.Command("go", "build", "-o", bin, "github.com/tekrar/tekrar/cmd/tekrar")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build tekrar:", err)
		return 1
	}
	return dbtest.Main(m)
}

// ChildEnv is this process's environment without any tekrar setting, plus extra. A
// developer's own DATABASE_URL or TEKRAR_ADDR must not leak into a test's process.
func ChildEnv(extra ...string) []string {
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

// Output collects a child's output while the child writes it.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Proc is one running tekrar.
type Proc struct {
	Cmd    *exec.Cmd
	Stdout *Output
	Stderr *Output
	Err    error // cmd.Wait's result, readable once Done is closed
	done   chan struct{}
}

// Done is closed once the process has been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Start starts the binary with env (see ChildEnv) and args. stdin may be nil.
func Start(t testing.TB, env []string, stdin io.Reader, args ...string) *Proc {
	t.Helper()
	if bin == "" {
		t.Fatal("proctest: no tekrar binary: the package's TestMain must call proctest.Main")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = stdin
	p := &Proc{Cmd: cmd, Stdout: &Output{}, Stderr: &Output{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	// Started as pglocal starts Postgres, from a thread that never exits: Pdeathsig then means
	// "the test binary died", so a test killed by its timeout leaves no tekrar running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := pglocal.StartChild(cmd); err != nil {
		t.Fatalf("start tekrar %v: %v", args, err)
	}
	go func() {
		p.Err = cmd.Wait()
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

// Exited reports whether the process has been reaped.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits at most timeout for the process to exit and returns its exit code (-1 when a
// signal killed it). It fails the test, with the process's output, on timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("tekrar %v did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.Cmd.Args[1:], timeout, p.Stdout, p.Stderr)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// Run runs the binary to completion and returns its output and exit code.
func Run(t testing.TB, env []string, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := Start(t, env, stdin, args...)
	code = p.Wait(t, 30*time.Second)
	return p.Stdout.String(), p.Stderr.String(), code
}

// MustRun runs the binary and fails the test unless it exits 0.
func MustRun(t testing.TB, env []string, stdin io.Reader, args ...string) string {
	t.Helper()
	stdout, stderr, code := Run(t, env, stdin, args...)
	if code != 0 {
		t.Fatalf("tekrar %v exited %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
	}
	return stdout
}
