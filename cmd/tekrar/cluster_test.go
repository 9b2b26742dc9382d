package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/cluster"
	"github.com/tekrar/tekrar/internal/pglocal"
)

// TestClusterCommand: `tekrar cluster` starts three nodes in a kept directory, prints a
// DATABASE_URL that takes writes, starts again on the kept data after it was SIGKILLed, and
// Ctrl-C stops every process of it.
// It skips when patroni or etcd is missing, unless TEKRAR_CLUSTER_REQUIRED=1 (CI).
func TestClusterCommand(t *testing.T) {
	if err := cluster.Available(); err != nil {
		if os.Getenv("TEKRAR_CLUSTER_REQUIRED") == "1" {
			t.Fatalf("TEKRAR_CLUSTER_REQUIRED=1 but %v", err)
		}
		t.Skipf("no local Patroni cluster: %v", err)
	}
	// Not under t.TempDir(): as root Patroni runs as the postgres OS user, which must be able
	// to enter every parent of the directory.
	dir, err := os.MkdirTemp("/tmp", "tekrar-cl-cmd-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		datas, _ := filepath.Glob(filepath.Join(dir, "node*", "data"))
		for _, data := range datas { // whatever a failed run left
			for _, pid := range pglocal.ProcsIn(data) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.RemoveAll(dir)
	})

	// First run: a new cluster; then SIGKILLed, as a closed terminal or an OOM kill would.
	p, dbURL := startCluster(t, dir)
	for _, want := range []string{"target_session_attrs=read-write", "host=127.0.0.1,127.0.0.1,127.0.0.1"} {
		if !strings.Contains(dbURL, want) {
			t.Errorf("DATABASE_URL %s lacks %s", dbURL, want)
		}
	}
	if n := strings.Count(p.stdout.String(), "Patroni http://"); n != 3 {
		t.Errorf("tekrar cluster printed %d Patroni REST URLs, want 3:\n%s", n, p.stdout)
	}
	execSQL(t, dbURL, `CREATE TABLE kept (n int)`)
	p.signal(t, syscall.SIGKILL)
	p.wait(t, 30*time.Second)

	// Second run on the same directory: the orphaned postgres processes are cleared, the
	// URL is the same and the data is there.
	p, again := startCluster(t, dir)
	if again != dbURL {
		t.Errorf("the second run printed DATABASE_URL %s, the first %s", again, dbURL)
	}
	execSQL(t, dbURL, `INSERT INTO kept VALUES (1)`)

	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("tekrar cluster exited %d after Ctrl-C\nstderr:\n%s", code, p.stderr)
	}
	datas, _ := filepath.Glob(filepath.Join(dir, "node*", "data"))
	if len(datas) != 3 {
		t.Fatalf("%d data directories kept in %s, want 3", len(datas), dir)
	}
	for _, data := range datas {
		if pids := pglocal.ProcsIn(data); len(pids) > 0 {
			t.Errorf("processes %v still run in %s after Ctrl-C", pids, data)
		}
	}
}

// startCluster starts `tekrar cluster` on dir and returns it with the DATABASE_URL it printed.
func startCluster(t *testing.T, dir string) (*proc, string) {
	t.Helper()
	p := startTekrar(t, childEnv("TEKRAR_CLUSTER_DIR="+dir), nil, "cluster")
	urlLine := regexp.MustCompile(`DATABASE_URL='([^']+)' tekrar serve`)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if m := urlLine.FindStringSubmatch(p.stdout.String()); m != nil {
			return p, m[1]
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("tekrar cluster printed no DATABASE_URL (exited: %v %v)\nstdout:\n%s\nstderr:\n%s", p.exited(), p.err, p.stdout, p.stderr)
		}
	}
}

func execSQL(t *testing.T, url, query string) {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, query); err != nil {
		t.Fatalf("%s through %s: %v", query, url, err)
	}
}
