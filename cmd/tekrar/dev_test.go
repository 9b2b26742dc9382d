package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/dbtest"
	"github.com/tekrar/tekrar/internal/pglocal"
)

// TestDevSIGKILLLeavesNoPostgres: a SIGKILLed `tekrar dev` cannot stop its Postgres itself,
// so the kernel must (Pdeathsig); the next `tekrar dev` on the same directory then starts on
// the kept data, and Ctrl-C stops the server and its Postgres.
func TestDevSIGKILLLeavesNoPostgres(t *testing.T) {
	t.Parallel()
	// When the killed tekrar's postmaster is orphaned it becomes our child rather than init's,
	// so that this test can reap it: an init that is slow to reap leaves a zombie that still
	// has its pid. Other orphans this makes ours stay zombies until the test binary exits.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("become a child subreaper: %v", err)
	}

	// Not under t.TempDir(): as root the private Postgres runs as the postgres OS user,
	// which must be able to enter every parent of the directory.
	devDir, err := os.MkdirTemp("/tmp", "tekrar-devtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(devDir) })
	if err := os.Chmod(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(devDir, "data")
	// Runs after the tekrar processes are killed (cleanups run last first): whatever still
	// runs in the data directory goes too, so that a failed test leaves nothing behind.
	t.Cleanup(func() {
		for _, pid := range pglocal.ProcsIn(data) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	startDev := func(readyWithin time.Duration) (*proc, string) {
		t.Helper()
		ports := freePorts(t, 2)
		p := startTekrar(t, childEnv("TEKRAR_DEV_DIR="+devDir, "TEKRAR_DEV_PG_PORT="+strconv.Itoa(ports[0]),
			"TEKRAR_ADDR="+addrOf(ports[1])), nil, "dev")
		base := "http://" + addrOf(ports[1])
		waitReady(t, p, base, readyWithin)
		return p, base
	}
	c := newHTTPClient()
	order := orderJSONBody(4500, "tok_visa")

	// First start: initdb, migrations, demo seed.
	first, base := startDev(90 * time.Second)
	if !strings.Contains(first.stdout.String(), "tekrar dev is serving on "+base+"\n") {
		t.Errorf("dev did not print where it serves:\n%s", first.stdout)
	}
	checkREADMEBanner(t, first.stdout.String(), strings.TrimPrefix(base, "http://"))
	r := mustSend(t, c, "POST", base+"/v1/orders", demoClientSecret, order, "Idempotency-Key", "kept-across-kill")
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("first order: %d %s %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	firstBody := r.Body
	pm := postmasterPID(t, data)
	backends := pglocal.ProcsIn(data)
	if len(backends) == 0 || !slices.Contains(backends, pm) {
		t.Fatalf("postmaster %d is not among the processes running in %s: %v", pm, data, backends)
	}

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 10*time.Second)
	waitUntil(t, 10*time.Second, "the killed tekrar's postmaster and backends to die", func() bool {
		for _, pid := range backends {
			reapIfOurs(pid)
		}
		return gone(pm) && len(pglocal.ProcsIn(data)) == 0
	})

	// Second start on the kept directory: no initdb, the first run's data is there.
	second, base := startDev(60 * time.Second)
	if r := mustSend(t, c, "GET", base+"/v1/client", demoClientSecret, nil); r.Status != 200 {
		t.Fatalf("demo client after restart: %d %s", r.Status, r.Body)
	}
	r = mustSend(t, c, "POST", base+"/v1/orders", demoClientSecret, order, "Idempotency-Key", "kept-across-kill")
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(firstBody) {
		t.Fatalf("the first run's order was not kept: %d replayed=%q\n%s\nwant\n%s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body, firstBody)
	}
	pm2 := postmasterPID(t, data)
	if pm2 == pm {
		t.Fatalf("the second run reports the first run's postmaster %d", pm)
	}

	second.signal(t, syscall.SIGINT)
	if code := second.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("tekrar dev exited %d after SIGINT, want 0\nstderr:\n%s", code, second.stderr)
	}
	waitUntil(t, 10*time.Second, "the second postmaster to be gone", func() bool {
		reapIfOurs(pm2)
		return gone(pm2) && len(pglocal.ProcsIn(data)) == 0
	})
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid is still there after Ctrl-C (%v): Postgres was not shut down cleanly", err)
	}
}

// postmasterPID reads the pid on the first line of data/postmaster.pid.
func postmasterPID(t testing.TB, data string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		t.Fatalf("postmaster.pid starts with %q", first)
	}
	return pid
}

// reapIfOurs collects pid if it is a zombie postgres child of this process. Only postgres
// zombies are reaped: collecting a tekrar would steal the exit status exec.Cmd waits for.
func reapIfOurs(pid int) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return
	}
	// pid (comm) state ppid ...
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return
	}
	fields := strings.Fields(s[end+1:])
	if s[open+1:end] != "postgres" || len(fields) < 2 || fields[0] != "Z" || fields[1] != strconv.Itoa(os.Getpid()) {
		return
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
}

// checkREADMEBanner: the README's sample of what `tekrar dev` prints had fallen behind (it
// lacked the health line). The sample, with its address and Postgres port put in place of the
// README's, is exactly what dev printed.
func checkREADMEBanner(t *testing.T, stdout, addr string) {
	t.Helper()
	var sample []string
	lines := readmeSection(t, "Two commands")
	for i, line := range lines {
		if strings.HasPrefix(line, "`tekrar dev` prints") {
			open := slices.Index(lines[i:], "```")
			if open < 0 {
				break
			}
			for _, l := range lines[i+open+1:] {
				if l == "```" {
					break
				}
				sample = append(sample, l)
			}
			break
		}
	}
	if len(sample) == 0 {
		t.Fatal("README.md's Two commands has no sample of what tekrar dev prints")
	}
	m := regexp.MustCompile(`postgres@127\.0\.0\.1:(\d+)/`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("dev printed no psql URL:\n%s", stdout)
	}
	want := strings.NewReplacer("127.0.0.1:8080", addr, "127.0.0.1:54329", "127.0.0.1:"+m[1]).Replace(strings.Join(sample, "\n"))
	if got := strings.TrimSpace(stdout); got != want {
		t.Errorf("README.md's sample of what tekrar dev prints is not what it prints\nREADME:\n%s\ndev:\n%s", want, got)
	}
}

// TestDevSeedsOnlyADatabaseOfItsOwn: the demo secret and login are public (README), so dev
// must not seed them into a database named by DATABASE_URL that serves clients or operators
// of its own. It refuses such a database in one line, exiting non-zero and writing nothing,
// and the demo secret then opens nothing under serve there. A database without clients and
// operators it does seed, so dev on a fresh database still works as the README says.
func TestDevSeedsOnlyADatabaseOfItsOwn(t *testing.T) {
	t.Parallel()
	c := newHTTPClient()
	for _, tc := range []struct {
		name  string
		setUp []string // a command run on the database first, with its stdin
		stdin string
	}{
		{"a client", []string{"clients", "create", "iOS app"}, ""},
		{"an operator", []string{"operators", "create", "--role", "viewer", "ops@example.com"}, "correct horse battery\n"},
	} {
		t.Run("refuses a database with "+tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := dbtest.NewURL(t)
			db := openDB(t, dbURL)
			mustRun(t, childEnv("DATABASE_URL="+dbURL), strings.NewReader(tc.stdin), tc.setUp...)
			before := countRows(t, db, `SELECT (SELECT count(*) FROM clients) + (SELECT count(*) FROM operators)`)

			ports := freePorts(t, 1)
			stdout, stderr, code := runTekrar(t, childEnv("DATABASE_URL="+dbURL, "TEKRAR_ADDR="+addrOf(ports[0])), nil, "dev")
			if code == 0 {
				t.Fatalf("dev exited 0 on a database with %s; stdout:\n%s", tc.name, stdout)
			}
			if line := oneLine(t, "stderr", stderr); !strings.Contains(line, "refusing to seed the public demo credentials") {
				t.Errorf("stderr %q does not say why dev refused", line)
			}
			if strings.Contains(stdout, "serving") {
				t.Errorf("dev served although it refused:\n%s", stdout)
			}
			if n := countRows(t, db, `SELECT (SELECT count(*) FROM clients) + (SELECT count(*) FROM operators)`); n != before {
				t.Errorf("%d clients and operators after the refusal, want the %d there were", n, before)
			}
			h := clients.Hash(demoClientSecret)
			if n := countRows(t, db, `SELECT count(*) FROM clients WHERE secret_hash = $1`, h[:]); n != 0 {
				t.Errorf("the demo client was seeded")
			}
			if n := countRows(t, db, `SELECT count(*) FROM operators WHERE email = $1`, demoOperatorEmail); n != 0 {
				t.Errorf("the demo operator was seeded")
			}

			// serve on the database dev refused: the public secret opens nothing.
			srv := startTekrar(t, childEnv("DATABASE_URL="+dbURL, "TEKRAR_ADDR="+addrOf(ports[0])), nil, "serve")
			base := "http://" + addrOf(ports[0])
			waitReady(t, srv, base, 30*time.Second)
			r := mustSend(t, c, "GET", base+"/v1/client", demoClientSecret, nil)
			if r.Status != 401 || problemCode(r.Body) != "unauthorized" {
				t.Errorf("demo secret under serve: %d %s, want 401 unauthorized", r.Status, r.Body)
			}
			srv.signal(t, syscall.SIGTERM)
			srv.wait(t, 15*time.Second)
		})
	}

	t.Run("seeds a database without clients or operators", func(t *testing.T) {
		t.Parallel()
		dbURL := dbtest.NewURL(t)
		ports := freePorts(t, 1)
		p := startTekrar(t, childEnv("DATABASE_URL="+dbURL, "TEKRAR_ADDR="+addrOf(ports[0])), nil, "dev")
		base := "http://" + addrOf(ports[0])
		waitReady(t, p, base, 30*time.Second)
		if r := mustSend(t, c, "GET", base+"/v1/client", demoClientSecret, nil); r.Status != 200 {
			t.Errorf("demo secret under dev on an empty database: %d %s", r.Status, r.Body)
		}
		// The banner said Ctrl-C stopped "its Postgres", which dev did not start here, and
		// repeated DATABASE_URL, password and all.
		out := p.stdout.String()
		if strings.Contains(out, "its Postgres") || !strings.Contains(out, "Postgres keeps running") {
			t.Errorf("dev on DATABASE_URL does not say that its Postgres keeps running:\n%s", out)
		}
		if u, _ := url.Parse(dbURL); strings.Contains(out, u.Host+u.Path) {
			t.Errorf("dev repeats DATABASE_URL on stdout:\n%s", out)
		}
		p.signal(t, syscall.SIGTERM)
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Errorf("dev exited %d after SIGTERM; stderr:\n%s", code, p.stderr)
		}
	})
}
