// Package pglocal runs a private PostgreSQL server as a child process: for `tekrar dev` on a
// kept data directory, and for test binaries on a throwaway RAM-backed one.
//
// The server is started directly (not through pg_ctl, which daemonizes) so that the kernel can
// kill it with its parent: a SIGKILLed test binary leaves no postgres running, and the next
// ephemeral Start sweeps the directory it left behind. A root parent runs the server as the
// "postgres" OS user, because initdb and postgres refuse to run as root.
//
// Layout of a server directory:
//
//	data/          the cluster (PGDATA)
//	.s.PGSQL.N     the unix socket the URLs point at
//	postgres.log   server output, unless Options.Log is set
//	owner.pid      ephemeral only: pid of the process the server belongs to
package pglocal

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/lib/pq" // the readiness probe connects like every user of the server
)

const (
	// unixPort names the socket file of a server without TCP; the socket lives in a private
	// directory, so any fixed number is free.
	unixPort = 5432
	// maxSocketPath is sizeof(sockaddr_un.sun_path) on Linux minus the terminating NUL.
	maxSocketPath = 107
	readyTimeout  = 30 * time.Second
	stopTimeout   = 10 * time.Second
)

// Options configures Start.
type Options struct {
	Dir  string    // kept data directory; empty means ephemeral (RAM-backed, removed on Stop)
	Port int       // >0: also listen on 127.0.0.1:Port (dev mode, for psql and load tools)
	Log  io.Writer // where server output goes; nil: a file postgres.log in the directory
	// Settings are extra server settings, "name=value", passed on the command line after
	// pglocal's own, which they override: a test's synchronous_commit=on, say. A setting
	// given here cannot be changed by ALTER SYSTEM, which the command line outranks.
	Settings []string

	standbyOf *Server // set by StartStandby: copy this server's cluster instead of initdb
}

// Server is a running private PostgreSQL server. Its methods are safe for concurrent use.
type Server struct {
	dir       string
	data      string
	port      int // 0 when unix-only
	ephemeral bool
	settings  []string
	binDir    string
	as        *runAs

	logw     io.Writer   // what the children write to
	logFile  *os.File    // set when we opened postgres.log
	logStart int64       // size of postgres.log when the postmaster started
	tail     *tailBuffer // set when Options.Log is used

	mu       sync.Mutex // guards proc and stopped
	proc     *proc
	stopped  bool
	stopOnce sync.Once
	stopErr  error
}

// proc is one run of the postmaster; exited is closed once it has been reaped.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's result, readable after exited is closed
}

// Start starts a server and returns once it accepts connections. ctx bounds the startup
// only; the server runs until Stop or until this process dies.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	as, err := serverUser()
	if err != nil {
		return nil, err
	}
	s := &Server{port: opts.Port, ephemeral: opts.Dir == "", settings: opts.Settings, binDir: binDir, as: as}
	defer func() {
		if err != nil {
			s.cleanupFailedStart()
		}
	}()

	if s.ephemeral {
		_ = Sweep() // best effort: what it cannot remove belongs to someone else
		if err := s.makeEphemeralDir(); err != nil {
			return nil, err
		}
	} else if err := s.prepareKeptDir(opts.Dir); err != nil {
		return nil, err
	}
	if sock := s.socketPath(); len(sock) > maxSocketPath {
		return nil, fmt.Errorf("unix socket path %s is %d bytes, over the limit of %d: use a shorter directory", sock, len(sock), maxSocketPath)
	}
	if err := s.openLog(opts.Log); err != nil {
		return nil, err
	}

	if _, err := os.Stat(filepath.Join(s.data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := s.makeCluster(ctx, opts.standbyOf); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("check data directory: %w", err)
	} else if err := s.checkNotRunning(); err != nil {
		return nil, err
	}

	if err := s.startPostgres(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) makeEphemeralDir() error {
	dir, err := os.MkdirTemp(ephemeralBase(), dirPrefix)
	if err != nil {
		return fmt.Errorf("create server directory: %w", err)
	}
	s.dir, s.data = dir, filepath.Join(dir, "data")
	if err := s.as.checkReachable(dir); err != nil { // TMPDIR may be private to root
		return err
	}
	owner := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := os.WriteFile(filepath.Join(dir, ownerFile), owner, 0o644); err != nil {
		return fmt.Errorf("write owner pid: %w", err)
	}
	return s.as.chown(dir)
}

func (s *Server) prepareKeptDir(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	s.dir, s.data = dir, filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := s.as.checkReachable(dir); err != nil {
		return err
	}
	return s.as.chown(dir)
}

// checkNotRunning fails when a postmaster still serves the kept data directory (another
// `tekrar dev`). A dead postmaster's leftovers are cleared instead: its orphaned backends
// would make postgres refuse to start ("pre-existing shared memory block is still in use"),
// and a postmaster.pid whose pid was reused by an unrelated process would too.
func (s *Server) checkNotRunning() error {
	pm, err := readPostmasterPID(s.data)
	if err != nil {
		return nil // no lock file: nothing runs
	}
	real, err := filepath.EvalSymlinks(s.data)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if alive(pm.pid) {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pm.pid))
		if err != nil || cwd == real {
			return fmt.Errorf("a postgres server (pid %d) is already running on %s: stop the other tekrar dev using it first", pm.pid, s.dir)
		}
		if err := os.Remove(filepath.Join(s.data, "postmaster.pid")); err != nil {
			return fmt.Errorf("remove stale postmaster.pid: %w", err)
		}
	}
	return killDirProcs(s.data, 5*time.Second)
}

func (s *Server) socketPath() string {
	return filepath.Join(s.dir, ".s.PGSQL."+strconv.Itoa(s.socketPort()))
}

func (s *Server) socketPort() int {
	if s.port > 0 {
		return s.port
	}
	return unixPort
}

func (s *Server) openLog(w io.Writer) error {
	if w != nil {
		s.tail = &tailBuffer{}
		s.logw = io.MultiWriter(w, s.tail)
		return nil
	}
	// Handing postgres an *os.File lets it write there directly; any other writer needs a pipe
	// that every backend inherits.
	f, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	s.logFile, s.logw = f, f
	return nil
}

func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, name), args...)
	cmd.Dir = s.dir // the parent's working directory may be closed to the postgres user
	cmd.SysProcAttr = s.as.sysProcAttr()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (s *Server) initdb(ctx context.Context) error {
	args := []string{"-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"}
	if s.ephemeral {
		args = append(args, "--no-sync") // the data dies with the server anyway
	}
	cmd := s.command(ctx, "initdb", args...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, s.logw)
	cmd.Stderr = cmd.Stdout
	if err := StartChild(cmd); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, lastLines(out.String(), 5))
	}
	return nil
}

func (s *Server) postgresArgs() []string {
	args := []string{"-D", s.data, "-k", s.dir, "-p", strconv.Itoa(s.socketPort())}
	settings := []string{
		"max_connections=200",
		"shared_buffers=128MB",
		// The socket belongs to the postgres user; 0777 lets a root parent, or a developer's
		// own account, connect to it.
		"unix_socket_permissions=0777",
	}
	if s.port > 0 {
		settings = append(settings, "listen_addresses=127.0.0.1")
	} else {
		settings = append(settings, "listen_addresses=")
	}
	if s.ephemeral {
		settings = append(settings,
			"fsync=off", "synchronous_commit=off", "full_page_writes=off",
			// Dynamic shared memory as files in the data directory rather than in /dev/shm
			// itself: a killed server's segments then go with its directory.
			"dynamic_shared_memory_type=mmap",
		)
	}
	for _, kv := range append(settings, s.settings...) {
		args = append(args, "-c", kv)
	}
	return args
}

// startPostgres starts the postmaster and waits until it answers a query. Callers serialize
// it (Start owns s; Restart holds s.mu).
func (s *Server) startPostgres(ctx context.Context) error {
	s.markLog()
	cmd := s.command(context.Background(), "postgres", s.postgresArgs()...)
	cmd.Stdout, cmd.Stderr = s.logw, s.logw
	if err := StartChild(cmd); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	s.proc = p
	if err := s.waitReady(ctx, p); err != nil {
		_ = s.halt()
		return fmt.Errorf("start postgres: %w", err)
	}
	return nil
}

// waitReady polls with a real query, the one check that proves clients can use the server.
func (s *Server) waitReady(ctx context.Context, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	db, err := sql.Open("postgres", s.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		var one int
		err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("postgres exited during startup (%v): %s", p.err, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v): %s", ctx.Err(), err, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// halt stops the current postmaster: SIGINT asks for a fast shutdown (roll back sessions,
// checkpoint, exit); SIGKILL follows if that takes too long.
func (s *Server) halt() error {
	p := s.proc
	if p == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	_ = killDirProcs(s.data, 5*time.Second)
	return fmt.Errorf("postgres did not shut down within %v and was killed", stopTimeout)
}

// Stop shuts the server down and, for an ephemeral server, removes its directory. Calling it
// again returns the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopped = true
		var errs []error
		if err := s.halt(); err != nil {
			errs = append(errs, fmt.Errorf("stop postgres: %w", err))
		}
		if s.logFile != nil {
			_ = s.logFile.Close()
		}
		if s.ephemeral {
			if err := os.RemoveAll(s.dir); err != nil {
				errs = append(errs, fmt.Errorf("remove server directory: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// Restart shuts the server down and starts it again on the same directory and socket, so
// URLs stay valid; tests use it to check how callers survive a database restart.
func (s *Server) Restart(ctx context.Context) error {
	return s.RestartAfter(ctx, func() {})
}

// RestartAfter is Restart with whileDown run while the server is stopped: tests use it to
// make something happen during a database outage (a frozen worker waking, say).
func (s *Server) RestartAfter(ctx context.Context, whileDown func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("restart postgres: server is stopped")
	}
	if err := s.halt(); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	whileDown()
	return s.startPostgres(ctx)
}

func (s *Server) cleanupFailedStart() {
	_ = s.halt()
	if s.logFile != nil {
		_ = s.logFile.Close()
	}
	if s.ephemeral && s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// URL returns a lib/pq URL for database over the unix socket. The port is spelled out because
// it names the socket file and lib/pq would otherwise take PGPORT from the environment.
func (s *Server) URL(database string) string {
	q := url.Values{}
	q.Set("host", s.dir)
	q.Set("port", strconv.Itoa(s.socketPort()))
	q.Set("sslmode", "disable")
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database, RawQuery: q.Encode()}
	return u.String()
}

// TCPURL returns a lib/pq URL for database over TCP, or "" when the server has no TCP port.
func (s *Server) TCPURL(database string) string {
	if s.port <= 0 {
		return ""
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     "127.0.0.1:" + strconv.Itoa(s.port),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Dir returns the server directory (socket, log, and the cluster in its data subdirectory).
func (s *Server) Dir() string { return s.dir }

// pid returns the postmaster's pid, or 0 when it is not running.
func (s *Server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// markLog starts a new run of the log, so that startup errors quote this postmaster only.
func (s *Server) markLog() {
	if s.tail != nil {
		s.tail.Reset()
	}
	if s.logFile != nil {
		if fi, err := s.logFile.Stat(); err == nil {
			s.logStart = fi.Size()
		}
	}
}

// logTail returns the end of this run's server output, for error messages.
func (s *Server) logTail() string {
	if s.tail != nil {
		return lastLines(s.tail.String(), 10)
	}
	if s.logFile == nil {
		return ""
	}
	f, err := os.Open(s.logFile.Name())
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 4096
	if fi, err := f.Stat(); err == nil {
		_, _ = f.Seek(max(s.logStart, fi.Size()-window), io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, window))
	return lastLines(string(b), 10)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last few kilobytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 8192

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = t.buf[:0]
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
