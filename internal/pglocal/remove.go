package pglocal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Remove deletes the kept directory of a private Postgres (Options.Dir), so that the next
// Start creates a new, empty cluster: `tekrar dev reset`. It refuses a directory that holds no
// cluster (no data/PG_VERSION), so that a mistyped directory cannot delete someone's files,
// and one whose postmaster still runs. Backends orphaned by a killed postmaster are killed
// first. A directory that does not exist is reported as not removed, without an error.
func Remove(dir string) (removed bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("data directory: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		return false, fmt.Errorf("%s holds no private Postgres (no data/PG_VERSION); not removing it", dir)
	}
	if pm, err := readPostmasterPID(data); err == nil && alive(pm.pid) && slices.Contains(ProcsIn(data), pm.pid) {
		return false, fmt.Errorf("a postgres server (pid %d) is running on %s: stop the tekrar dev using it first", pm.pid, dir)
	}
	if err := killDirProcs(data, 5*time.Second); err != nil {
		return false, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("remove %s: %w", dir, err)
	}
	return true, nil
}
