package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tekrar/tekrar/internal/pglocal"
)

// Defaults of Options: Patroni's own (30 s, 10 s, 10 s) make a test wait half a minute for
// each failover; these fail over in seconds on one machine (see patroniYAML for what they
// trade).
const (
	NodesDefault        = 3
	TTLDefault          = 10 * time.Second
	LoopWaitDefault     = 2 * time.Second
	RetryTimeoutDefault = 5 * time.Second
)

// Database is the database Start creates for tekrar, beside Postgres's own.
const Database = "tekrar"

// ErrNoLeader reports that no node holds the leader lock at the moment (during a failover).
var ErrNoLeader = errors.New("no node holds the leader lock")

// Options configures Start.
type Options struct {
	Dir                         string        // kept directory; "" = ephemeral (RAM-backed when possible), removed by Stop
	Nodes                       int           // data nodes, default 3
	Async                       bool          // false: synchronous_mode + synchronous_mode_strict; true: Patroni's asynchronous default (control runs)
	TTL, LoopWait, RetryTimeout time.Duration // defaults 10s, 2s, 5s; whole seconds
	MaximumLagOnFailover        int64         // bytes; 0 = Patroni's default
	Log                         io.Writer     // patroni/etcd/postgres output, each line prefixed with its process; nil = discarded (kept in files under Dir either way)

	// EtcdV3 makes Patroni use etcd's v3 API (the etcd3 section) instead of the v2 API.
	// Patroni 3.0.2 can then lose acknowledged writes when a frozen leader wakes (see
	// patroniYAML): for showing that, or for a Patroni of 3.0.3 or later.
	EtcdV3 bool
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = NodesDefault
	}
	if o.TTL == 0 {
		o.TTL = TTLDefault
	}
	if o.LoopWait == 0 {
		o.LoopWait = LoopWaitDefault
	}
	if o.RetryTimeout == 0 {
		o.RetryTimeout = RetryTimeoutDefault
	}
}

func (o Options) validate() error {
	switch {
	case o.Nodes < 1 || o.Nodes > 9:
		return fmt.Errorf("cluster: Nodes = %d, want 1 to 9", o.Nodes)
	case o.TTL < time.Second || o.LoopWait < time.Second || o.RetryTimeout < time.Second:
		return fmt.Errorf("cluster: TTL, LoopWait and RetryTimeout must be at least a second (%v, %v, %v)", o.TTL, o.LoopWait, o.RetryTimeout)
	case o.MaximumLagOnFailover < 0:
		return fmt.Errorf("cluster: MaximumLagOnFailover = %d, want 0 or more", o.MaximumLagOnFailover)
	}
	return nil
}

// Cluster is a running local Patroni cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts      Options
	dir       string
	ephemeral bool
	binDir    string
	user      pglocal.ServerUser
	ports     ports

	mu      sync.Mutex // guards etcd, nodes' procs and frozen, stopped
	etcd    *proc
	nodes   []*node
	stopped bool
	claimed bool // a kept directory's owner.pid is ours: Stop removes it

	stopOnce sync.Once
	stopErr  error
	logMu    sync.Mutex // serialises lines written to opts.Log
}

type node struct {
	index   int
	name    string
	dir     string
	data    string
	patroni *proc // nil or exited once killed
	frozen  bool
}

// ports are what the URLs are made of; a kept directory records them in cluster.json so that
// `tekrar cluster` prints the same DATABASE_URL every time.
type ports struct {
	EtcdClient int   `json:"etcd_client"`
	EtcdPeer   int   `json:"etcd_peer"`
	Postgres   []int `json:"postgres"`
	REST       []int `json:"rest"`
}

const (
	dirPrefix   = "tekrar-cl-"
	ownerFile   = "owner.pid"
	portsFile   = "cluster.json"
	startPolls  = 100 * time.Millisecond
	stopTimeout = 30 * time.Second
)

// Start starts etcd and one Patroni per node, and returns when a leader accepts writes and
// every replica streams from it, with the database tekrar created. ctx bounds the startup
// only; the cluster runs until Stop or until this process dies.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	binDir, err := pglocal.FindBinDir()
	if err != nil {
		return nil, err
	}
	user, err := pglocal.LookupServerUser()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, ephemeral: o.Dir == "", binDir: binDir, user: user}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	for i := range o.Nodes {
		n := &node{index: i, name: nodeName(i), dir: filepath.Join(c.dir, nodeName(i))}
		n.data = filepath.Join(n.dir, "data")
		c.nodes = append(c.nodes, n)
		if err := c.writeNode(n); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := c.startPatroni(n); err != nil {
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, fmt.Errorf("start cluster: %w (logs in %s)", err, c.dir)
	}
	if err := c.createDatabase(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func nodeName(i int) string { return "node" + strconv.Itoa(i) }

// Available reports whether this machine can run a cluster: nil when patroni, etcd and the
// PostgreSQL server binaries are installed, else what is missing and how to install it.
func Available() error {
	var missing []string
	for _, bin := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not found on PATH: install them (Debian/Ubuntu: apt-get install patroni etcd-server)", strings.Join(missing, " and "))
	}
	if _, err := pglocal.FindBinDir(); err != nil {
		return err
	}
	return nil
}

func (c *Cluster) prepareDir() error {
	if c.ephemeral {
		_ = Sweep()
		base := os.TempDir()
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			base = "/dev/shm"
		}
		dir, err := os.MkdirTemp(base, dirPrefix)
		if err != nil {
			return fmt.Errorf("create cluster directory: %w", err)
		}
		c.dir = dir
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("write owner pid: %w", err)
		}
	} else {
		dir, err := filepath.Abs(c.opts.Dir)
		if err != nil {
			return fmt.Errorf("cluster directory: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cluster directory: %w", err)
		}
		c.dir = dir
	}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return fmt.Errorf("cluster directory: %w", err)
	}
	if err := c.user.CheckReachable(c.dir); err != nil {
		return err
	}
	if err := c.checkNotRunning(); err != nil {
		return err
	}
	return c.loadPorts()
}

// checkNotRunning refuses a kept directory whose cluster another live process runs: two
// Patronis on one data directory would fight over it. The postgres processes a killed owner
// left behind (Patroni starts them detached, so they outlive it) are killed instead, and the
// directory is claimed.
func (c *Cluster) checkNotRunning() error {
	if c.ephemeral {
		return nil
	}
	owner := filepath.Join(c.dir, ownerFile)
	if b, err := os.ReadFile(owner); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) != syscall.ESRCH {
			return fmt.Errorf("a cluster is already running on %s (process %d): stop the other tekrar cluster first", c.dir, pid)
		}
	}
	for i := range c.opts.Nodes {
		if err := killProcsIn(filepath.Join(c.dir, nodeName(i), "data"), 5*time.Second); err != nil {
			return err
		}
	}
	if err := os.WriteFile(owner, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("write owner pid: %w", err)
	}
	c.claimed = true
	return nil
}

// loadPorts reads a kept directory's ports, or picks free ones and records them.
func (c *Cluster) loadPorts() error {
	path := filepath.Join(c.dir, portsFile)
	if b, err := os.ReadFile(path); err == nil {
		var p ports
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if len(p.Postgres) != c.opts.Nodes || len(p.REST) != c.opts.Nodes {
			return fmt.Errorf("%s was made for %d nodes, not %d: use another directory", c.dir, len(p.Postgres), c.opts.Nodes)
		}
		c.ports = p
		return nil
	}
	free, err := freePorts(2 + 2*c.opts.Nodes)
	if err != nil {
		return err
	}
	c.ports = ports{EtcdClient: free[0], EtcdPeer: free[1], Postgres: free[2 : 2+c.opts.Nodes], REST: free[2+c.opts.Nodes:]}
	b, _ := json.MarshalIndent(c.ports, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1, holding each until all are
// chosen so that none is handed out twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func (c *Cluster) writeNode(n *node) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", n.dir, err)
	}
	if err := c.user.Chown(n.dir); err != nil {
		return err
	}
	cfg := nodeConfig{
		Name: n.name, Dir: n.dir, Data: n.data, BinDir: c.binDir,
		PGPort: c.ports.Postgres[n.index], RESTPort: c.ports.REST[n.index], EtcdPort: c.ports.EtcdClient,
		TTL: seconds(c.opts.TTL), LoopWait: seconds(c.opts.LoopWait), RetryTimeout: seconds(c.opts.RetryTimeout),
		EtcdV3: c.opts.EtcdV3, MaxLag: c.opts.MaximumLagOnFailover, Sync: !c.opts.Async, Ephemeral: c.ephemeral,
	}
	b, err := cfg.yaml()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "patroni.yml"), b, 0o644); err != nil {
		return fmt.Errorf("write patroni.yml of %s: %w", n.name, err)
	}
	return nil
}

func seconds(d time.Duration) int { return max(1, int(d.Round(time.Second)/time.Second)) }

func (c *Cluster) createDatabase(ctx context.Context) error {
	leader, err := c.Leader(ctx)
	if err != nil {
		return fmt.Errorf("create database %s: %w", Database, err)
	}
	db, err := openDB(c.SuperuserURL(leader, "postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, Database).Scan(&exists); err != nil {
		return fmt.Errorf("create database %s: %w", Database, err)
	}
	if exists {
		return nil
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+Database); err != nil {
		return fmt.Errorf("create database %s: %w", Database, err)
	}
	return nil
}

// URL returns a lib/pq URL naming every node, with the hosts and ports as lists in the query
// and target_session_attrs=read-write, so that a client finds whichever node is the primary
// (README, "Several hosts"). connect_timeout bounds the wait on a frozen node.
func (c *Cluster) URL(database string) string {
	hosts := make([]string, len(c.ports.Postgres))
	ps := make([]string, len(c.ports.Postgres))
	for i, p := range c.ports.Postgres {
		hosts[i], ps[i] = "127.0.0.1", strconv.Itoa(p)
	}
	q := url.Values{}
	q.Set("host", strings.Join(hosts, ","))
	q.Set("port", strings.Join(ps, ","))
	q.Set("target_session_attrs", "read-write")
	q.Set("sslmode", "disable")
	q.Set("connect_timeout", "2")
	return pqURL(q, database)
}

// SuperuserURL returns a lib/pq URL for one node alone, whatever its role: for checks.
func (c *Cluster) SuperuserURL(node int, database string) string {
	q := url.Values{}
	q.Set("host", "127.0.0.1")
	q.Set("port", strconv.Itoa(c.ports.Postgres[node]))
	q.Set("sslmode", "disable")
	q.Set("connect_timeout", "2")
	return pqURL(q, database)
}

func pqURL(q url.Values, database string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database, RawQuery: q.Encode()}
	// lib/pq splits the lists on commas: keep them unescaped so the URL reads as documented.
	return strings.ReplaceAll(u.String(), "%2C", ",")
}

// RESTURL returns the base URL of a node's Patroni REST API.
func (c *Cluster) RESTURL(node int) string {
	return "http://127.0.0.1:" + strconv.Itoa(c.ports.REST[node])
}

// EtcdURL returns the client URL of the cluster's etcd.
func (c *Cluster) EtcdURL() string { return "http://127.0.0.1:" + strconv.Itoa(c.ports.EtcdClient) }

// Dir returns the cluster directory (configuration, logs, data).
func (c *Cluster) Dir() string { return c.dir }

// Nodes returns the number of data nodes.
func (c *Cluster) Nodes() int { return len(c.ports.Postgres) }

// Name returns a node's Patroni member name.
func (c *Cluster) Name(node int) string { return nodeName(node) }
