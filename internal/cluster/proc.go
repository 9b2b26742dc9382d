package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tekrar/tekrar/internal/pglocal"
)

// proc is one run of etcd or of a node's Patroni; exited is closed once it has been reaped.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signalGroup signals the process group the child leads (Setpgid), which holds any helper it
// forked; postgres is not in it (Patroni starts it in a session of its own).
func (p *proc) signalGroup(sig syscall.Signal) {
	if p.running() {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// environ is this process's environment without the variables that would override the
// configuration written for the child (PATRONI_*, ETCD_*), plus HOME set to dir: Patroni runs
// as the postgres user, whose home may not be ours.
func environ(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATRONI_") || strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+dir)
}

// output opens where a child writes: the log file at path and, when Options.Log is set, that
// writer too, each line prefixed with the child's name. The returned file is handed to the
// child and closed by the caller once the child has started. Postgres, started by Patroni,
// inherits it, so its lines appear under its node's name too.
func (c *Cluster) output(path, name string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := c.user.Chown(path); err != nil {
		_ = f.Close()
		return nil, err
	}
	if c.opts.Log == nil {
		return f, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	lw := &lineWriter{mu: &c.logMu, w: c.opts.Log, prefix: name + ": "}
	go func() {
		defer f.Close()
		defer r.Close()
		_, _ = io.Copy(io.MultiWriter(f, lw), r)
		lw.flush()
	}()
	return w, nil
}

// lineWriter writes whole lines, each prefixed, to a writer shared by every child.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.mu.Lock()
		_, _ = io.WriteString(l.w, l.prefix+string(l.buf[:i+1]))
		l.mu.Unlock()
		l.buf = l.buf[i+1:]
	}
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		_, _ = l.Write([]byte("\n"))
	}
}

func (c *Cluster) spawn(name, dir, logPath string, cred bool, bin string, args ...string) (*proc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	out, err := c.output(logPath, name)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child holds its own copy
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = environ(dir)
	cmd.Stdout, cmd.Stderr = out, out
	if cred {
		cmd.SysProcAttr = c.user.SysProcAttr()
	} else {
		cmd.SysProcAttr = (pglocal.ServerUser{}).SysProcAttr()
	}
	if err := pglocal.StartChild(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// startEtcd starts the one etcd member that holds Patroni's leader lock, and waits for it.
func (c *Cluster) startEtcd(ctx context.Context) error {
	dir := filepath.Join(c.dir, "etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create etcd directory: %w", err)
	}
	client := c.EtcdURL()
	peer := "http://127.0.0.1:" + strconv.Itoa(c.ports.EtcdPeer)
	p, err := c.spawn("etcd", dir, filepath.Join(c.dir, "etcd.log"), false, "etcd",
		"--name", "etcd0",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcd0="+peer, "--initial-cluster-state", "new",
		"--initial-cluster-token", "tekrar-"+filepath.Base(c.dir),
		"--enable-v2=true") // Patroni's etcd section speaks v2 (see patroniYAML)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.etcd = p
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if body, err := httpGet(ctx, client+"/health"); err == nil && strings.Contains(body, `"true"`) {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("etcd exited during startup (%v): see %s", p.err, filepath.Join(c.dir, "etcd.log"))
		case <-ctx.Done():
			return fmt.Errorf("etcd not ready: %w", ctx.Err())
		case <-time.After(startPolls):
		}
	}
}

func (c *Cluster) startPatroni(n *node) error {
	p, err := c.spawn(n.name, n.dir, filepath.Join(n.dir, "patroni.log"), true, "patroni", filepath.Join(n.dir, "patroni.yml"))
	if err != nil {
		return err
	}
	c.mu.Lock()
	n.patroni, n.frozen = p, false
	c.mu.Unlock()
	return nil
}

func httpGet(ctx context.Context, u string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return string(b), nil
}

func (c *Cluster) node(i int) (*node, error) {
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("cluster: no node %d (the cluster has %d)", i, len(c.nodes))
	}
	return c.nodes[i], nil
}

// Kill SIGKILLs a node's Patroni and every postgres process of it, as a machine that loses
// power would: the node holds its leader lock until the TTL runs out.
func (c *Cluster) Kill(node int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.node(node)
	if err != nil {
		return err
	}
	if p := n.patroni; p.running() {
		p.signalGroup(syscall.SIGKILL)
		<-p.exited
	}
	n.frozen = false
	if err := killProcsIn(n.data, 5*time.Second); err != nil {
		return fmt.Errorf("kill %s: %w", n.name, err)
	}
	return nil
}

// killProcsIn SIGKILLs every process whose working directory is data until none is left.
func killProcsIn(data string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		pids := pglocal.ProcsIn(data)
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

// Freeze SIGSTOPs a node's Patroni and all its postgres processes, as a machine that stalls
// (a paused VM, a long GC or I/O stall) would: it neither refreshes its lock nor answers, and
// wakes with a stale view when thawed. Patroni is stopped first so that it cannot react to its
// postgres stopping; postgres processes are listed again until a pass finds no new one, since
// the postmaster may fork a backend between the listing and its own stop.
func (c *Cluster) Freeze(node int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.node(node)
	if err != nil {
		return err
	}
	if !n.patroni.running() {
		return fmt.Errorf("freeze %s: its Patroni is not running", n.name)
	}
	n.patroni.signalGroup(syscall.SIGSTOP)
	n.frozen = true
	var stopped []int
	for range 10 {
		fresh := 0
		for _, pid := range pglocal.ProcsIn(n.data) {
			if !slices.Contains(stopped, pid) {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				stopped = append(stopped, pid)
				fresh++
			}
		}
		if fresh == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Thaw SIGCONTs what Freeze stopped: postgres first, then Patroni, within a millisecond or
// so, as a machine wakes.
func (c *Cluster) Thaw(node int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.node(node)
	if err != nil {
		return err
	}
	for _, pid := range pglocal.ProcsIn(n.data) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	n.patroni.signalGroup(syscall.SIGCONT)
	n.frozen = false
	return nil
}

// Restart starts a killed node's Patroni again and returns once the node streams from the
// leader as a replica: its Patroni rewinds what diverged (pg_rewind) or copies the data again.
func (c *Cluster) Restart(ctx context.Context, node int) error {
	c.mu.Lock()
	n, err := c.node(node)
	if err == nil && n.patroni.running() {
		err = fmt.Errorf("restart %s: its Patroni is running (Kill it first)", n.name)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.startPatroni(n); err != nil {
		return err
	}
	for {
		err := c.streams(ctx, node)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restart %s: %w (last: %v)", n.name, ctx.Err(), err)
		case <-time.After(startPolls * 2):
		}
	}
}

// Stop stops the cluster. A kept cluster is shut down in order (Patroni stops its postgres
// with a checkpoint, then etcd), so that it starts again as it was; an ephemeral one is
// killed and its directory removed. Calling it again returns the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.stopped = true
		var errs []error
		if !c.ephemeral {
			for _, n := range c.nodes {
				for _, pid := range pglocal.ProcsIn(n.data) {
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
				n.patroni.signalGroup(syscall.SIGCONT)
				n.patroni.signalGroup(syscall.SIGTERM)
			}
			deadline := time.After(stopTimeout)
			for _, n := range c.nodes {
				if n.patroni.running() {
					select {
					case <-n.patroni.exited:
					case <-deadline:
						errs = append(errs, fmt.Errorf("stop %s: Patroni did not stop within %v and was killed", n.name, stopTimeout))
					}
				}
			}
		}
		for _, n := range c.nodes {
			if p := n.patroni; p.running() {
				p.signalGroup(syscall.SIGKILL)
				<-p.exited
			}
			if err := killProcsIn(n.data, 5*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if p := c.etcd; p.running() {
			if c.ephemeral {
				p.signalGroup(syscall.SIGKILL)
			} else {
				p.signalGroup(syscall.SIGTERM)
			}
			select {
			case <-p.exited:
			case <-time.After(10 * time.Second):
				p.signalGroup(syscall.SIGKILL)
				<-p.exited
			}
		}
		if c.claimed {
			_ = os.Remove(filepath.Join(c.dir, ownerFile))
		}
		if c.ephemeral && c.dir != "" {
			if err := os.RemoveAll(c.dir); err != nil {
				errs = append(errs, fmt.Errorf("remove cluster directory: %w", err))
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Sweep removes the directories of ephemeral clusters whose owner process is gone, first
// killing the postgres processes still running in them: Patroni and etcd die with their owner
// (Pdeathsig), but Patroni starts postgres detached, so it outlives a killed test binary until
// the next Start sweeps it.
func Sweep() error {
	var errs []error
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
		for _, dir := range dirs {
			if !abandoned(dir) {
				continue
			}
			datas, _ := filepath.Glob(filepath.Join(dir, "node*", "data"))
			for _, data := range datas {
				if err := killProcsIn(data, 5*time.Second); err != nil {
					errs = append(errs, err)
				}
			}
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("sweep %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

func abandoned(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil {
		return time.Since(fi.ModTime()) > time.Minute
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
