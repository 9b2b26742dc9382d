package pglocal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// runAs is the OS identity the server processes run under: nil means the current user.
// initdb and postgres both refuse to run as root, so a root parent hands them to the
// "postgres" account that the server package creates.
type runAs struct {
	uid, gid uint32
}

func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs an OS user named postgres to own the server (initdb refuses root): create it (useradd --system postgres) or run as another user: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of user postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of user postgres: %w", err)
	}
	return &runAs{uint32(uid), uint32(gid)}, nil
}

// sysProcAttr puts a child in its own process group, so that a Ctrl-C in the terminal reaches
// only the parent (which then shuts the server down in order), and asks the kernel to SIGKILL
// it when the parent dies, so that a killed test binary leaves no server behind.
func (r *runAs) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if r != nil {
		// Groups left empty drops root's supplementary groups.
		attr.Credential = &syscall.Credential{Uid: r.uid, Gid: r.gid}
	}
	return attr
}

// chown gives path to the server user; a no-op when not running as root.
func (r *runAs) chown(path string) error {
	if r == nil {
		return nil
	}
	if err := os.Chown(path, int(r.uid), int(r.gid)); err != nil {
		return fmt.Errorf("hand %s to the postgres user: %w", path, err)
	}
	return nil
}

// checkReachable fails with an actionable message when the server user cannot traverse the
// parents of dir. Without this check the child fails with a misleading
// "fork/exec ...: permission denied" from chdir.
func (r *runAs) checkReachable(dir string) error {
	if r == nil {
		return nil
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("check %s: %w", p, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		var ok bool
		switch {
		case st.Uid == r.uid:
			ok = perm&0o100 != 0
		case st.Gid == r.gid:
			ok = perm&0o010 != 0
		default:
			ok = perm&0o001 != 0
		}
		if !ok {
			return fmt.Errorf("directory %s is not reachable by the postgres OS user: %s is not searchable (mode %v); use a directory elsewhere or run chmod o+x %s", dir, p, perm, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// Every child is started from one goroutine that locks its OS thread and never returns. Linux
// delivers Pdeathsig when the thread that forked the child exits, not the process; the Go
// runtime terminates a thread when a goroutine that locked it ends. Starting from this thread,
// which lives as long as the process, makes the signal mean "the parent process died" no
// matter how the caller's goroutine treats its own thread.
var (
	spawnOnce sync.Once
	spawnReqs = make(chan spawnReq)
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan<- error
}

func spawner() {
	runtime.LockOSThread() // never unlocked: see above
	for r := range spawnReqs {
		r.done <- r.cmd.Start()
	}
}

// StartChild is cmd.Start run on the spawner thread, so that a Pdeathsig set on cmd means
// "this process died"; cmd.Wait may be called from anywhere.
func StartChild(cmd *exec.Cmd) error {
	spawnOnce.Do(func() { go spawner() })
	done := make(chan error, 1)
	spawnReqs <- spawnReq{cmd, done}
	return <-done
}

// alive reports whether a process with this pid exists and has not exited; EPERM means it
// exists but belongs to someone else. A zombie counts as dead: on hosts where pid 1 reaps
// orphans slowly, a SIGKILLed postmaster lingers as one for seconds, and must not block the
// next start.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

// zombie reads the state field of /proc/PID/stat (after the parenthesised command name,
// which may itself contain spaces and parentheses).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// ServerUser is the OS identity the server processes run under, for a package that starts
// postgres through another program: internal/cluster runs Patroni, which runs postgres, and
// both refuse root the same way. The zero value means the current user.
type ServerUser struct{ as *runAs }

// LookupServerUser returns the "postgres" OS user when running as root, else the current user.
func LookupServerUser() (ServerUser, error) {
	as, err := serverUser()
	return ServerUser{as}, err
}

// SysProcAttr is the child's SysProcAttr: its own process group, SIGKILL when this process
// dies (start it with StartChild), and the server user's credential when running as root.
func (u ServerUser) SysProcAttr() *syscall.SysProcAttr { return u.as.sysProcAttr() }

// Chown gives path to the server user; a no-op when not running as root.
func (u ServerUser) Chown(path string) error { return u.as.chown(path) }

// CheckReachable fails, saying what to change, when the server user cannot reach dir.
func (u ServerUser) CheckReachable(dir string) error { return u.as.checkReachable(dir) }
