package pglocal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// dirPrefix names ephemeral server directories so that Sweep can find them.
	dirPrefix = "tekrar-pg-"
	// ownerFile holds the pid of the process that started an ephemeral server. Pdeathsig kills
	// the server with its owner, but nothing removes the directory then: Sweep does, later.
	ownerFile = "owner.pid"
	// unclaimedGrace protects a directory whose owner file is not written yet.
	unclaimedGrace = time.Minute
)

// ephemeralBase is where ephemeral servers live: RAM-backed /dev/shm when the machine has it.
func ephemeralBase() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// Sweep removes the directories of ephemeral servers whose owner process is gone, first
// killing any server process still running in them and freeing the System V shared memory
// segment the postmaster leaves behind when it is killed. Start calls it for every ephemeral
// server, so killed test runs cost RAM only until the next one.
func Sweep() error {
	bases := []string{"/dev/shm", os.TempDir()}
	var errs []error
	for i, base := range bases {
		if i > 0 && base == bases[0] {
			continue
		}
		dirs, err := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, dir := range dirs {
			if abandoned(dir) {
				errs = append(errs, reap(dir))
			}
		}
	}
	return errors.Join(errs...)
}

// abandoned reports whether dir is an ephemeral server directory whose owner has died.
func abandoned(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil {
		// Its owner may be between creating the directory and writing the file.
		return time.Since(fi.ModTime()) > unclaimedGrace
	}
	return !alive(pid)
}

// reap kills what still runs in an abandoned directory and removes it.
func reap(dir string) error {
	data := filepath.Join(dir, "data")
	pm, _ := readPostmasterPID(data)
	if err := killDirProcs(data, 5*time.Second); err != nil {
		return fmt.Errorf("sweep %s: %w", dir, err)
	}
	if pm.shmID >= 0 {
		removeSegment(pm.shmID, pm.pid)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sweep %s: %w", dir, err)
	}
	return nil
}

// postmasterPID is what postgres records in data/postmaster.pid that we need: line 1 is the
// postmaster's pid, line 7 the key and id of its System V shared memory segment.
type postmasterPID struct {
	pid   int
	shmID int
}

func readPostmasterPID(data string) (postmasterPID, error) {
	pm := postmasterPID{shmID: -1}
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return pm, err
	}
	lines := strings.Split(string(b), "\n")
	if pm.pid, err = strconv.Atoi(strings.TrimSpace(lines[0])); err != nil {
		return pm, fmt.Errorf("parse postmaster.pid: %w", err)
	}
	if len(lines) > 6 {
		if f := strings.Fields(lines[6]); len(f) == 2 {
			if id, err := strconv.Atoi(f[1]); err == nil {
				pm.shmID = id
			}
		}
	}
	return pm, nil
}

// killDirProcs SIGKILLs every process whose working directory is data (postgres chdirs into
// its data directory, postmaster and backends alike; backends run in sessions of their own, so
// a process group kill would miss them) and waits until none is left. Matching on the working
// directory rather than a recorded pid cannot hit an unrelated process that reused the pid.
func killDirProcs(data string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		pids := ProcsIn(data)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still run in %s", pids, data)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ProcsIn lists the live processes whose working directory is dir (symbolic links
// resolved). Postgres chdirs into its data directory, postmaster and backends alike, so this
// finds a cluster's processes without trusting a recorded pid; a zombie has no working
// directory, so a killed process drops out of the list even before it is reaped.
func ProcsIn(dir string) []int {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == real {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeSegment frees the postmaster's System V segment once nothing is attached. A killed
// postmaster never frees it, and the kernel's segment table is finite (shmmni). Checking the
// creator pid guards against a segment id reused by another server.
func removeSegment(id, creator int) {
	var desc unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err != nil {
		return
	}
	if int(desc.Cpid) == creator && desc.Nattch == 0 {
		_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	}
}
