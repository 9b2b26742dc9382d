// Package cluster starts and drives a local Patroni cluster (one etcd, several Postgres nodes
// each run by its own Patroni) for trying tekrar on a replicated database and for testing
// what a failover does to it: `tekrar cluster` and the failover harness use it.
//
// It does on one machine what docs/ha.md describes for three: synchronous replication that
// cannot fall back to asynchronous (synchronous_mode_strict), pg_rewind so that a demoted
// leader rejoins as a replica, and clients that find the primary themselves through a
// several-host URL with target_session_attrs=read-write.
//
// Every process is started from pglocal's spawner thread in its own process group with
// Pdeathsig, so a killed test binary takes etcd and Patroni with it. Patroni starts postgres
// detached (the way pg_ctl does), so the postmaster of a node outlives a killed Patroni: Kill,
// Freeze and Thaw find a node's postgres processes by their working directory (postgres
// chdirs into its data directory), and Start sweeps the ephemeral directories of dead owners
// the way pglocal does.
//
// Layout of a cluster directory:
//
//	cluster.json   the ports, so that a kept directory keeps its URLs across runs
//	owner.pid      pid of the process the cluster belongs to
//	etcd/          etcd's data; etcd.log
//	nodeN/         patroni.yml, patroni.log (Patroni and its postgres), data/ (PGDATA),
//	               the unix socket and the pgpass file Patroni writes
package cluster
