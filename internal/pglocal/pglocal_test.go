package pglocal

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start(%+v): %v", opts, err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func open(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec1(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// keptDir returns a not yet existing directory that the postgres OS user can reach; t.TempDir
// lives under a parent only root may enter.
func keptDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "tekrar-kept-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return filepath.Join(base, "pg")
}

// gone reports whether no process has pid any more, not even a zombie waiting to be reaped.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// procState returns the state letter /proc shows for pid (Z for a zombie), for messages.
func procState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) == 0 {
		return "unknown"
	}
	return fields[0]
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEphemeralServer(t *testing.T) {
	s := startServer(t, Options{})
	if want := filepath.Join(ephemeralBase(), dirPrefix); !strings.HasPrefix(s.Dir(), want) {
		t.Errorf("Dir() = %s, want a directory starting with %s", s.Dir(), want)
	}
	if s.TCPURL("postgres") != "" {
		t.Errorf("TCPURL() = %q without a port, want empty", s.TCPURL("postgres"))
	}
	db := open(t, s.URL("postgres"))
	var fsync string
	if err := db.QueryRow("SHOW fsync").Scan(&fsync); err != nil {
		t.Fatalf("query over %s: %v", s.URL("postgres"), err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %s on an ephemeral server, want off", fsync)
	}
	var user string
	if err := db.QueryRow("SELECT current_user").Scan(&user); err != nil || user != "postgres" {
		t.Errorf("current_user = %q, %v; want postgres", user, err)
	}
	db.Close()

	pid, data := s.pid(), s.data
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s still there after Stop (%v)", s.Dir(), err)
	}
	if !gone(pid) {
		t.Errorf("postmaster %d still exists after Stop", pid)
	}
	if pids := ProcsIn(data); len(pids) > 0 {
		t.Errorf("processes %v still run in %s after Stop", pids, data)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestKeptServerKeepsData(t *testing.T) {
	dir := keptDir(t)
	port := freePort(t)

	s := startServer(t, Options{Dir: dir, Port: port})
	db := open(t, s.TCPURL("postgres"))
	exec1(t, db, "CREATE TABLE kept (v text)")
	exec1(t, db, "INSERT INTO kept VALUES ('survives')")
	db.Close()

	// A second server on the same directory must refuse while the first runs.
	if s2, err := Start(context.Background(), Options{Dir: dir}); err == nil {
		s2.Stop()
		t.Fatal("second Start on a directory in use succeeded")
	} else if !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Start error = %v, want it to say the server is already running", err)
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Fatalf("kept cluster gone after Stop: %v", err)
	}

	began := time.Now()
	s = startServer(t, Options{Dir: dir})
	t.Logf("restart on a kept directory took %v", time.Since(began))
	var v string
	if err := open(t, s.URL("postgres")).QueryRow("SELECT v FROM kept").Scan(&v); err != nil || v != "survives" {
		t.Errorf("after restart: v = %q, %v; want survives", v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres.log")); err != nil {
		t.Errorf("no server log: %v", err)
	}
}

func TestKeptServerRecoversFromKill(t *testing.T) {
	dir := keptDir(t)
	s := startServer(t, Options{Dir: dir})
	exec1(t, open(t, s.URL("postgres")), "CREATE TABLE k (id int)")
	// What a SIGKILLed `tekrar dev` leaves: a dead postmaster and its postmaster.pid.
	pid := s.pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "killed postmaster gone", func() bool { return gone(pid) })

	s2 := startServer(t, Options{Dir: dir})
	var n int
	if err := open(t, s2.URL("postgres")).QueryRow("SELECT count(*) FROM k").Scan(&n); err != nil {
		t.Errorf("after recovery: %v", err)
	}
}

func TestKeptDirUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root parent hands the server to another user")
	}
	closed := t.TempDir() // its parent is root-only
	_, err := Start(context.Background(), Options{Dir: filepath.Join(closed, "pg")})
	if err == nil || !strings.Contains(err.Error(), "not reachable by the postgres OS user") {
		t.Fatalf("Start under a root-only directory: %v, want a clear 'not reachable' error", err)
	}
}

func TestRestart(t *testing.T) {
	s := startServer(t, Options{})
	db := open(t, s.URL("postgres"))
	exec1(t, db, "CREATE TABLE r (id int)")
	before := s.pid()
	if err := s.Restart(context.Background()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.pid() == before {
		t.Error("Restart kept the same postmaster")
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM r").Scan(&n); err != nil {
		t.Errorf("query after restart: %v", err)
	}
}

func TestLogWriter(t *testing.T) {
	var out tailBuffer
	startServer(t, Options{Log: &out})
	if !strings.Contains(out.String(), "ready to accept connections") {
		t.Errorf("server output not written to Options.Log: %q", out.String())
	}
}

func TestURL(t *testing.T) {
	s := &Server{dir: "/dev/shm/tekrar-pg-123"}
	want := "postgres://postgres@/tekrar?host=%2Fdev%2Fshm%2Ftekrar-pg-123&port=5432&sslmode=disable"
	if got := s.URL("tekrar"); got != want {
		t.Errorf("URL() = %s, want %s", got, want)
	}
	s.port = 15432
	if got, want := s.TCPURL("tekrar"), "postgres://postgres@127.0.0.1:15432/tekrar?sslmode=disable"; got != want {
		t.Errorf("TCPURL() = %s, want %s", got, want)
	}
}

const helperEnv = "PGLOCAL_TEST_HELPER"

func init() {
	if os.Getenv(helperEnv) == "1" {
		// Keep the main thread for the main goroutine, so the helper's starting goroutine
		// below runs on a thread that the runtime really ends (the main thread never is).
		runtime.LockOSThread()
	}
}

// TestHelperProcess is the parent that TestKilledParentLeavesNoServer kills. It starts the
// server from a goroutine that locks its OS thread and ends, which makes the Go runtime end
// that thread: had the fork happened there, Pdeathsig would kill the server right away.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestKilledParentLeavesNoServer")
	}
	started := make(chan *Server)
	go func() {
		runtime.LockOSThread()
		s, err := Start(context.Background(), Options{})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		started <- s
	}()
	s := <-started
	// The starting thread is gone by now: the server must still answer.
	db, _ := sql.Open("postgres", s.URL("postgres"))
	for range 3 {
		time.Sleep(50 * time.Millisecond)
		if err := db.Ping(); err != nil {
			fmt.Println("ERROR server died with its starting thread:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("READY %s %d\n", s.Dir(), s.pid())
	time.Sleep(2 * time.Minute) // killed long before
	os.Exit(3)
}

func TestKilledParentLeavesNoServer(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var dir string
	var pid int
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if _, err := fmt.Sscanf(lines.Text(), "READY %s %d", &dir, &pid); err == nil {
			break
		}
		if strings.HasPrefix(lines.Text(), "ERROR") {
			t.Fatalf("helper: %s", lines.Text())
		}
	}
	if pid == 0 {
		t.Fatalf("helper exited without starting a server: %v", lines.Err())
	}
	data, err := filepath.EvalSymlinks(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if gone(pid) {
		t.Fatalf("postmaster %d not running before the kill", pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	began := time.Now()
	// The orphaned postmaster is reparented to init, so ESRCH also needs init to reap it
	// (about once a second on these machines).
	last := ""
	waitFor(t, 10*time.Second, fmt.Sprintf("postmaster %d gone after its parent was killed", pid), func() bool {
		if gone(pid) {
			return true
		}
		if st := procState(pid); st != last {
			t.Logf("%v after the kill the postmaster is in state %s", time.Since(began), st)
			last = st
		}
		return false
	})
	waitFor(t, 10*time.Second, "no process left in "+data, func() bool { return len(ProcsIn(data)) == 0 })
	t.Logf("postmaster and backends gone %v after the parent was killed", time.Since(began))

	// The directory stays behind until a sweep, which must leave live servers alone. (Any
	// test binary's Start sweeps, so on a busy machine another one may get there first.)
	live := startServer(t, Options{})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s of the killed run not swept by Start (%v)", dir, err)
	}
	if err := Sweep(); err != nil {
		t.Errorf("Sweep: %v", err)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Errorf("Sweep removed a live server's directory: %v", err)
	}
}

// TestSweepKillsOrphanedServer covers a server that outlived its owner (as when Pdeathsig
// could not fire): Sweep must kill it, free its shared memory and remove its directory.
func TestSweepKillsOrphanedServer(t *testing.T) {
	s := startServer(t, Options{})
	pid := s.pid()
	pm, err := readPostmasterPID(s.data)
	if err != nil || pm.shmID < 0 {
		t.Fatalf("postmaster.pid: %+v, %v", pm, err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), ownerFile), fmt.Appendf(nil, "%d\n", dead.Process.Pid), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := Sweep(); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	waitFor(t, 10*time.Second, "orphaned postmaster killed", func() bool { return gone(pid) })
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphaned directory %s not removed (%v)", s.Dir(), err)
	}
	if shmExists(t, pm.shmID) {
		t.Errorf("shared memory segment %d of the orphaned server not removed", pm.shmID)
	}
}

func shmExists(t *testing.T, id int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 && f[1] == fmt.Sprint(id) {
			return true
		}
	}
	return false
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A zombie (exited, not yet reaped) is not alive: a SIGKILLed postmaster that pid 1 has not
// reaped yet must not block the next start.
func TestZombieIsNotAlive(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !alive(pid) {
		t.Fatal("a running child is not alive")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not waited for yet: the child is a zombie until cmd.Wait reaps it.
	deadline := time.Now().Add(10 * time.Second)
	for !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatal("killed child never became a zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if alive(pid) {
		t.Fatal("a zombie counts as alive")
	}
	_ = cmd.Wait()
}
