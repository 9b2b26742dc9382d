package config

import (
	"os"
	"path/filepath"
)

// DefaultClusterDir is where `tekrar cluster` keeps its nodes, beside dev's Postgres and for
// the same reason: as root, Patroni and postgres run as the postgres OS user, which cannot
// enter root's home.
func DefaultClusterDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/tekrar/cluster"
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "tekrar", "cluster")
	}
	return filepath.Join(os.TempDir(), "tekrar-cluster")
}

// BindClusterDir registers where `tekrar cluster` keeps etcd's and each node's data.
func BindClusterDir(s *Set, p *string) {
	s.String(p, "cluster-dir", "TEKRAR_CLUSTER_DIR", DefaultClusterDir(), "directory of the local cluster: etcd, and each node's Patroni configuration, log and data (kept between runs)")
}
