package config

import (
	"os"
	"path/filepath"
)

// DefaultDevDir is where `tekrar dev` keeps its Postgres data. As root the server runs as the
// postgres OS user, which cannot enter root's home, so root's data goes under /var/lib;
// everyone else's under their cache directory.
func DefaultDevDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/tekrar/dev-postgres"
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "tekrar", "postgres")
	}
	return filepath.Join(os.TempDir(), "tekrar-dev-postgres")
}
