package dbtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/pglocal"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func currentDatabase(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var name string
	if err := db.Get(&name, "SELECT current_database()"); err != nil {
		t.Fatal(err)
	}
	return name
}

func tableExists(t *testing.T, db *sqlx.DB, table string) bool {
	t.Helper()
	var exists bool
	if err := db.Get(&exists, "SELECT to_regclass($1) IS NOT NULL", table); err != nil {
		t.Fatal(err)
	}
	return exists
}

func TestDatabasesAreIsolated(t *testing.T) {
	a, b := dbtest.New(t), dbtest.New(t)
	if currentDatabase(t, a) == currentDatabase(t, b) {
		t.Fatalf("two calls to New share database %s", currentDatabase(t, a))
	}
	if _, err := a.Exec("CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	if !tableExists(t, a, "only_in_a") {
		t.Fatal("table created in a is missing from a")
	}
	if tableExists(t, b, "only_in_a") {
		t.Error("table created in a shows up in b")
	}
}

// TestParallelTests runs tests the way packages will: in parallel, each creating the same
// table, which only works if each has a database of its own.
func TestParallelTests(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	t.Run("group", func(t *testing.T) {
		for i := range 4 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				db := dbtest.New(t)
				if _, err := db.Exec("CREATE TABLE scratch (id int); INSERT INTO scratch VALUES (1)"); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				seen[currentDatabase(t, db)] = true
			})
		}
	})
	if len(seen) != 4 {
		t.Errorf("4 parallel tests got %d distinct databases", len(seen))
	}
}

func TestMigrationsApplied(t *testing.T) {
	db := dbtest.New(t)
	for _, table := range []string{"clients", "operators"} {
		if !tableExists(t, db, table) {
			t.Errorf("table %s missing: migrations not applied to the test database", table)
		}
	}
}

func TestDatabaseDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("user", func(t *testing.T) {
		name = currentDatabase(t, dbtest.New(t))
	})
	admin, err := sql.Open("postgres", dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRow("SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if name == "" || n != 0 {
		t.Errorf("database %q still exists after its test ended", name)
	}
}

// TestServerRestart checks that a restarted private server keeps its test databases and
// that their URLs stay valid.
func TestServerRestart(t *testing.T) {
	if os.Getenv(dbtest.EnvURL) != "" {
		t.Skip("needs the private server")
	}
	srv := dbtest.Server(t)
	url := dbtest.NewURL(t)
	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := sqlx.Connect("postgres", url)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer db.Close()
	if !tableExists(t, db, "clients") {
		t.Error("test database lost its tables in the restart")
	}
}

const helperEnv = "DBTEST_HELPER"

// TestExternalServer runs this package's tests in a child against a server given by
// TEST_DATABASE_URL, then checks that the child started no server of its own and left no
// database behind.
func TestExternalServer(t *testing.T) {
	if os.Getenv(dbtest.EnvURL) != "" || os.Getenv(helperEnv) != "" {
		t.Skip("already the child")
	}
	srv, err := pglocal.Start(context.Background(), pglocal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	out, err := child(t, map[string]string{dbtest.EnvURL: srv.URL("postgres")},
		"^(TestDatabasesAreIsolated|TestParallelTests|TestMigrationsApplied|TestDatabaseDroppedAfterTest)$")
	if err != nil {
		t.Fatalf("tests against TEST_DATABASE_URL failed: %v\n%s", err, out)
	}
	if strings.Count(out, "--- PASS") < 4 {
		t.Fatalf("child ran too few tests:\n%s", out)
	}
	db, err := sqlx.Connect("postgres", srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left []string
	if err := db.Select(&left, "SELECT datname FROM pg_database WHERE datname LIKE 'tekrar%'"); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("databases left on the shared server: %v", left)
	}
}

// TestNoServerFails checks that a machine without PostgreSQL fails database tests with the
// install hint instead of skipping them.
func TestNoServerFails(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("already the child")
	}
	out, err := child(t, map[string]string{"PG_BINDIR": t.TempDir(), dbtest.EnvURL: ""}, "^TestMigrationsApplied$")
	if err == nil {
		t.Fatalf("tests passed without a server:\n%s", out)
	}
	if !strings.Contains(out, "--- FAIL: TestMigrationsApplied") || strings.Contains(out, "--- SKIP") {
		t.Errorf("want TestMigrationsApplied to fail, not skip:\n%s", out)
	}
	if !strings.Contains(out, pglocal.ErrNotInstalled.Error()) {
		t.Errorf("failure does not explain that PostgreSQL is missing:\n%s", out)
	}
}

// child runs this test binary again with extra environment and returns its output.
func child(t *testing.T, extra map[string]string, run string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	for k, v := range extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
