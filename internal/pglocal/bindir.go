package pglocal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNotInstalled reports that no PostgreSQL server binaries could be found. Callers test for it
// with errors.Is to tell "install something" apart from a server that failed to start.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// notInstalledHint completes ErrNotInstalled into one actionable sentence; it names both
// environment variables because the same error reaches `tekrar dev` and the test binaries.
const notInstalledHint = "install the PostgreSQL server package (Debian/Ubuntu: apt-get install postgresql) " +
	"or set PG_BINDIR to its bin directory, or use an existing server (DATABASE_URL; TEST_DATABASE_URL for tests)"

// debianLibRoot is where Debian and Ubuntu install one bin directory per server major version;
// none of them is on PATH by default.
const debianLibRoot = "/usr/lib/postgresql"

// FindBinDir returns the directory holding initdb and postgres. It looks, in order, at
// $PG_BINDIR, `pg_config --bindir`, the newest /usr/lib/postgresql/*/bin and finally PATH. An
// explicit but wrong PG_BINDIR is an error rather than a silent fall-through, so that a
// developer who pinned a version never runs another one by accident.
func FindBinDir() (string, error) {
	return findBinDir(os.Getenv("PG_BINDIR"), debianLibRoot)
}

func findBinDir(envDir, libRoot string) (string, error) {
	if envDir != "" {
		if hasServerBinaries(envDir) {
			return envDir, nil
		}
		return "", fmt.Errorf("%w in PG_BINDIR=%s: point PG_BINDIR at the bin directory of a PostgreSQL server installation or unset it",
			ErrNotInstalled, envDir)
	}
	// pg_config ships with libpq-dev too, where its bindir may hold no server: check it.
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			if dir := strings.TrimSpace(string(out)); hasServerBinaries(dir) {
				return dir, nil
			}
		}
	}
	if dir := newestVersionDir(libRoot); dir != "" {
		return dir, nil
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		// Follow a symlink such as /usr/local/bin/initdb so that postgres is looked up next to
		// the real initdb, the pair initdb itself expects.
		if real, err := filepath.EvalSymlinks(initdb); err == nil && hasServerBinaries(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if hasServerBinaries(filepath.Dir(initdb)) {
			return filepath.Dir(initdb), nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrNotInstalled, notInstalledHint)
}

// newestVersionDir returns root/<version>/bin for the highest version holding both binaries,
// comparing versions numerically so that 10 sorts after 9.6.
func newestVersionDir(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	type candidate struct {
		version []int
		dir     string
	}
	var found []candidate
	for _, e := range entries {
		v, ok := parseVersion(e.Name())
		dir := filepath.Join(root, e.Name(), "bin")
		if ok && hasServerBinaries(dir) {
			found = append(found, candidate{v, dir})
		}
	}
	if len(found) == 0 {
		return ""
	}
	best := slices.MaxFunc(found, func(a, b candidate) int { return slices.Compare(a.version, b.version) })
	return best.dir
}

func parseVersion(s string) ([]int, bool) {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}
