package cluster

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	_ "github.com/lib/pq" // the checks connect the way tekrar does
)

// leaderKey is where Patroni keeps the leader lock in etcd.
const leaderKey = "/service/" + Scope + "/leader"

// probeTimeout bounds one check of one node: a frozen node must not stall a check of the
// others, and a write on a leader with no synchronous standby waits forever.
const probeTimeout = 3 * time.Second

// Leader returns the index of the node holding the leader lock, read from etcd itself rather
// than from a Patroni, which may be frozen or hold a stale view; ErrNoLeader when no node
// holds it (between a lock's expiry and the next leader's race).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	name, err := c.etcdGet(ctx, leaderKey)
	if err != nil {
		return -1, fmt.Errorf("leader: %w", err)
	}
	if name == "" {
		return -1, ErrNoLeader
	}
	for i := range c.nodes {
		if nodeName(i) == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("leader: the lock names %q, not a node of this cluster", name)
}

// etcdGet reads one key of Patroni's, through the API Patroni writes it with; "" when it
// does not exist.
func (c *Cluster) etcdGet(ctx context.Context, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var req *http.Request
	var err error
	if c.opts.EtcdV3 {
		body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.EtcdURL()+"/v3/kv/range", bytes.NewReader(body))
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, c.EtcdURL()+"/v2/keys"+key+"?quorum=true", nil)
	}
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("etcd: %w", err)
	}
	defer resp.Body.Close()
	if !c.opts.EtcdV3 && resp.StatusCode == http.StatusNotFound {
		return "", nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("etcd: %s: %s", resp.Status, b)
	}
	var out struct {
		Kvs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
		Node struct {
			Value string `json:"value"`
		} `json:"node"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("etcd: %w", err)
	}
	if !c.opts.EtcdV3 {
		return out.Node.Value, nil
	}
	if len(out.Kvs) == 0 {
		return "", nil
	}
	v, err := base64.StdEncoding.DecodeString(out.Kvs[0].Value)
	if err != nil {
		return "", fmt.Errorf("etcd: %w", err)
	}
	return string(v), nil
}

// WaitLeader waits for a leader other than node not (-1: any) that accepts a write, and
// returns it. The write commits a transaction id, so under synchronous replication it
// succeeds only once the new leader has a synchronous standby too.
func (c *Cluster) WaitLeader(ctx context.Context, not int) (int, error) {
	var last error
	for {
		leader, err := c.Leader(ctx)
		switch {
		case err != nil:
			last = err
		case leader == not:
			last = fmt.Errorf("%s still holds the lock", nodeName(leader))
		default:
			if err := c.write(ctx, leader); err != nil {
				last = fmt.Errorf("%s holds the lock but: %w", nodeName(leader), err)
			} else {
				return leader, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("wait for a leader: %w (last: %v)", ctx.Err(), last)
		case <-time.After(startPolls * 2):
		}
	}
}

func openDB(url string) (*sql.DB, error) {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// write commits a transaction that takes a transaction id on node: it fails on a standby
// (25006 or "cannot assign TransactionIds during recovery") and waits for the synchronous
// standby on a primary.
func (c *Cluster) write(ctx context.Context, node int) error {
	db, err := openDB(c.SuperuserURL(node, "postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var xid int64
	if err := db.QueryRowContext(ctx, `SELECT txid_current()`).Scan(&xid); err != nil {
		return fmt.Errorf("write on %s: %w", nodeName(node), err)
	}
	return nil
}

// replica is a row of the leader's pg_stat_replication.
type replica struct {
	name, state, syncState string
	caughtUp               bool
}

// replicas returns what the leader's pg_stat_replication says of each standby, and whether
// each has replayed everything the leader had written when asked.
func (c *Cluster) replicas(ctx context.Context, leader int) ([]replica, error) {
	db, err := openDB(c.SuperuserURL(leader, "postgres"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, `
		SELECT application_name, state, sync_state, coalesce(replay_lsn >= pg_current_wal_lsn(), false)
		  FROM pg_stat_replication ORDER BY application_name`)
	if err != nil {
		return nil, fmt.Errorf("replication of %s: %w", nodeName(leader), err)
	}
	defer rows.Close()
	var out []replica
	for rows.Next() {
		var r replica
		if err := rows.Scan(&r.name, &r.state, &r.syncState, &r.caughtUp); err != nil {
			return nil, fmt.Errorf("replication of %s: %w", nodeName(leader), err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// streams reports whether node is a replica streaming from the current leader.
func (c *Cluster) streams(ctx context.Context, node int) error {
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	if leader == node {
		return fmt.Errorf("%s is the leader", nodeName(node))
	}
	rs, err := c.replicas(ctx, leader)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.name == nodeName(node) && r.state == "streaming" {
			return nil
		}
	}
	return fmt.Errorf("%s does not stream from %s", nodeName(node), nodeName(leader))
}

// Healthy reports whether the cluster is whole: every node's Patroni running and not frozen
// and answering, one leader that accepts a write, every other node streaming from it and
// caught up with that write, and, under synchronous replication, one of them its synchronous
// standby. It is what a test waits for between faults (WaitHealthy).
func (c *Cluster) Healthy(ctx context.Context) error {
	c.mu.Lock()
	for _, n := range c.nodes {
		if !n.patroni.running() {
			c.mu.Unlock()
			return fmt.Errorf("%s: Patroni is not running", n.name)
		}
		if n.frozen {
			c.mu.Unlock()
			return fmt.Errorf("%s is frozen", n.name)
		}
	}
	c.mu.Unlock()
	for i := range c.nodes {
		if _, err := httpGet(ctx, c.RESTURL(i)+"/health"); err != nil {
			return fmt.Errorf("%s: Patroni says postgres is not running: %w", nodeName(i), err)
		}
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	if err := c.write(ctx, leader); err != nil {
		return err
	}
	rs, err := c.replicas(ctx, leader)
	if err != nil {
		return err
	}
	var problems []string
	sync := 0
	for i := range c.nodes {
		if i == leader {
			continue
		}
		found := false
		for _, r := range rs {
			if r.name != nodeName(i) {
				continue
			}
			found = true
			if r.state != "streaming" {
				problems = append(problems, fmt.Sprintf("%s is %s", r.name, r.state))
			} else if !r.caughtUp {
				problems = append(problems, r.name+" lags")
			}
			if r.syncState == "sync" {
				sync++
			}
		}
		if !found {
			problems = append(problems, nodeName(i)+" does not stream from "+nodeName(leader))
		}
	}
	if !c.opts.Async && len(c.nodes) > 1 {
		if sync != 1 {
			problems = append(problems, fmt.Sprintf("%d synchronous standbys, want 1", sync))
		} else if err := c.syncKeyNames(ctx, leader, rs); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// syncKeyNames checks that Patroni's /sync key names the leader and the standby Postgres
// reports as synchronous. Patroni writes the key a loop after it sets
// synchronous_standby_names, and promotes only the node the key names: until then, with
// synchronous_mode_strict, a leader that fails leaves no node allowed to take over.
func (c *Cluster) syncKeyNames(ctx context.Context, leader int, rs []replica) error {
	v, err := c.etcdGet(ctx, "/service/"+Scope+"/sync")
	if err != nil {
		return err
	}
	var key struct {
		Leader      string  `json:"leader"`
		SyncStandby *string `json:"sync_standby"`
	}
	if v != "" {
		if err := json.Unmarshal([]byte(v), &key); err != nil {
			return fmt.Errorf("the /sync key %q: %w", v, err)
		}
	}
	for _, r := range rs {
		if r.syncState == "sync" && (key.Leader != nodeName(leader) || key.SyncStandby == nil || *key.SyncStandby != r.name) {
			return fmt.Errorf("the /sync key is %s, not yet naming %s and %s", v, nodeName(leader), r.name)
		}
	}
	return nil
}

// WaitHealthy polls Healthy until it holds or ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for {
		err := c.Healthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for a healthy cluster: %w (last: %v)", ctx.Err(), err)
		case <-time.After(startPolls * 3):
		}
	}
}

// Switchover asks the leader's Patroni for a planned switchover and returns the new leader
// once it accepts writes. Under synchronous replication the candidate is the synchronous
// standby, the one node Patroni may promote without losing a commit; asynchronous, Patroni
// picks the healthiest replica.
func (c *Cluster) Switchover(ctx context.Context) (int, error) {
	leader, err := c.Leader(ctx)
	if err != nil {
		return -1, fmt.Errorf("switchover: %w", err)
	}
	req := map[string]string{"leader": nodeName(leader)}
	if !c.opts.Async {
		rs, err := c.replicas(ctx, leader)
		if err != nil {
			return -1, fmt.Errorf("switchover: %w", err)
		}
		for _, r := range rs {
			if r.syncState == "sync" && r.state == "streaming" {
				req["candidate"] = r.name
			}
		}
		if req["candidate"] == "" {
			return -1, fmt.Errorf("switchover: %s has no synchronous standby", nodeName(leader))
		}
	}
	body, _ := json.Marshal(req)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(pctx, http.MethodPost, c.RESTURL(leader)+"/switchover", bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return -1, fmt.Errorf("switchover: %w", err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1, fmt.Errorf("switchover from %s: %s: %s", nodeName(leader), resp.Status, strings.TrimSpace(string(b)))
	}
	return c.WaitLeader(ctx, leader)
}
