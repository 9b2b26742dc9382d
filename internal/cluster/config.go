package cluster

import (
	"bytes"
	"fmt"
	"text/template"
)

// Scope is the Patroni cluster name: the etcd keys live under /service/<Scope>/.
const Scope = "tekrar"

// nodeConfig is what one node's patroni.yml is written from.
type nodeConfig struct {
	Name         string
	Dir          string // the node directory: socket, pgpass
	Data         string
	BinDir       string
	PGPort       int
	RESTPort     int
	EtcdPort     int
	EtcdV3       bool
	TTL          int
	LoopWait     int
	RetryTimeout int
	MaxLag       int64
	Sync         bool
	Ephemeral    bool
}

// patroniYAML is one node's Patroni configuration. The reasons for each setting:
//
//   - etcd, through its v2 API (etcd 3.4 started with --enable-v2), not the etcd3 section:
//     Patroni 3.0.2's etcd3 code renews the leader key unconditionally. A leader that was
//     frozen past its TTL wakes with its cached view of the cluster (itself leading), finds its
//     lease gone, takes a new one and writes the leader key over the one the node promoted
//     meanwhile holds; that node then sees another owner and demotes itself, its timeline
//     discarded with every write acknowledged on it (docs/ha.md, "The frozen leader that took
//     the lock back"). Patroni 3.0.3 made that write conditional (patroni/patroni#2689). The v2
//     code renews with a compare-and-swap on the key's value (prevValue=<own name>), so the
//     woken leader's write fails and it demotes. Options.EtcdV3 writes the etcd3 section, to
//     show the failure or for a Patroni that has the fix.
//   - ttl/loop_wait/retry_timeout default to 10/2/5 s, against Patroni's 30/10/10: a dead
//     leader is replaced in seconds, which a test can wait for. They exceed Patroni's rule
//     loop_wait + 2*retry_timeout <= ttl by two seconds: a leader whose etcd calls each took
//     most of retry_timeout could lose its lock while alive, a needless failover but no lost
//     commit, and the one local etcd answers in milliseconds. ops/cluster keeps 30/10/10.
//   - synchronous_mode with synchronous_mode_strict: a commit is acknowledged only once the
//     synchronous standby has it, and with no standby left commits wait rather than quietly
//     going asynchronous; Patroni promotes only the standby named in its /sync key, so no
//     acknowledged commit is lost by a failover. synchronous_node_count is 1: with three data
//     nodes the third becomes the new leader's synchronous standby, so protection survives one
//     failure; 2 would make every commit wait for the slower of two standbys and protect
//     nothing more, since the promoted node is always one that had every acknowledged commit.
//   - use_pg_rewind with wal_log_hints (pg_rewind needs it, or data checksums): a demoted
//     leader rewinds its diverged WAL and rejoins as a replica instead of being rebuilt; if
//     the rewind fails the data directory is removed and copied again.
//   - pg_hba trusts 127.0.0.1 for every user and replication: this is the local trial cluster
//     only, where nothing but this machine can connect; ops/cluster/patroni.yml uses passwords.
//   - a replica's copy starts with a fast checkpoint rather than a spread one, which on an
//     idle new cluster can keep it waiting minutes.
//   - ephemeral clusters (tests) run with fsync off (and initdb without syncing): their data dies with them, and a test
//     kills processes, never the machine. full_page_writes stays on (pg_rewind needs it), and
//     so does synchronous_commit, which synchronous replication is made of.
var patroniYAML = template.Must(template.New("patroni.yml").Parse(`# Written by tekrar's internal/cluster for a local trial cluster; see ops/cluster/ for machines.
scope: ` + Scope + `
namespace: /service/
name: {{.Name}}
log:
  level: INFO
restapi:
  listen: 127.0.0.1:{{.RESTPort}}
  connect_address: 127.0.0.1:{{.RESTPort}}
{{- if .EtcdV3}}
etcd3:
{{- else}}
etcd:
{{- end}}
  hosts: 127.0.0.1:{{.EtcdPort}}
bootstrap:
  dcs:
    ttl: {{.TTL}}
    loop_wait: {{.LoopWait}}
    retry_timeout: {{.RetryTimeout}}
{{- if .MaxLag}}
    maximum_lag_on_failover: {{.MaxLag}}
{{- end}}
    synchronous_mode: {{.Sync}}
    synchronous_mode_strict: {{.Sync}}
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: "on"
        max_connections: 200
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
  - encoding: UTF8
  - locale: C
{{- if .Ephemeral}}
  - no-sync
{{- end}}
postgresql:
  listen: 127.0.0.1:{{.PGPort}}
  connect_address: 127.0.0.1:{{.PGPort}}
  data_dir: {{.Data}}
  bin_dir: {{.BinDir}}
  pgpass: {{.Dir}}/pgpass
  basebackup:
  - checkpoint: fast
  use_pg_rewind: true
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
  parameters:
    unix_socket_directories: {{.Dir}}
    unix_socket_permissions: "0777"
{{- if .Ephemeral}}
    fsync: "off"
    dynamic_shared_memory_type: mmap
{{- end}}
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
`))

func (c nodeConfig) yaml() ([]byte, error) {
	var b bytes.Buffer
	if err := patroniYAML.Execute(&b, c); err != nil {
		return nil, fmt.Errorf("patroni.yml of %s: %w", c.Name, err)
	}
	return b.Bytes(), nil
}
