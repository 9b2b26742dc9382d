package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// A bad setting stops the process before it does any work, with one line naming the
// setting: no usage dump, no stack trace, nothing on stdout.
func TestBadConfigFailsAtStartWithOneLine(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	cases := []struct {
		name string
		env  []string
		args []string
		want string // in the one line
	}{
		{"shutdown timeout not a duration", []string{"DATABASE_URL=" + dbURL, "TEKRAR_SHUTDOWN_TIMEOUT=abc"}, []string{"serve"}, "TEKRAR_SHUTDOWN_TIMEOUT"},
		{"unknown log format", []string{"DATABASE_URL=" + dbURL, "TEKRAR_LOG_FORMAT=xml"}, []string{"serve"}, "TEKRAR_LOG_FORMAT"},
		{"max conns out of range", []string{"DATABASE_URL=" + dbURL, "TEKRAR_DB_MAX_CONNS=0"}, []string{"serve"}, "TEKRAR_DB_MAX_CONNS"},
		{"lease flag out of range", []string{"DATABASE_URL=" + dbURL}, []string{"serve", "--lease=5ms"}, "lease"},
		{"unknown flag", []string{"DATABASE_URL=" + dbURL}, []string{"serve", "--no-such-flag"}, "no-such-flag"},
		{"no database url", nil, []string{"serve"}, "DATABASE_URL"},
		{"not a postgres url", []string{"DATABASE_URL=mysql://root:hunter2secret@x/db"}, []string{"serve"}, "DATABASE_URL"},
		{"dev postgres port out of range", []string{"DATABASE_URL=" + dbURL, "TEKRAR_DEV_PG_PORT=80"}, []string{"dev"}, "TEKRAR_DEV_PG_PORT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startTekrar(t, childEnv(tc.env...), nil, tc.args...)
			code := p.wait(t, 10*time.Second)
			stdout, stderr := p.stdout.String(), p.stderr.String()
			if code == 0 {
				t.Fatalf("exit code 0, want a failure; stderr:\n%s", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout is not empty:\n%s", stdout)
			}
			line := oneLine(t, "stderr", stderr)
			if want := "tekrar " + tc.args[0] + ": "; !strings.HasPrefix(line, want) {
				t.Errorf("stderr %q does not start with %q", line, want)
			}
			if !strings.Contains(line, tc.want) {
				t.Errorf("stderr %q does not name %s", line, tc.want)
			}
			if strings.Contains(line, "hunter2secret") {
				t.Errorf("stderr repeats the connection string's password: %q", line)
			}
		})
	}
}

// Without a PostgreSQL installation, `tekrar dev` says where it looked and what to do, in
// one line.
func TestDevWithoutPostgresInstallation(t *testing.T) {
	t.Parallel()
	binDir := t.TempDir() // empty: no initdb, no postgres
	devDir := filepath.Join(t.TempDir(), "dev")
	ports := freePorts(t, 2)
	p := startTekrar(t, childEnv("PG_BINDIR="+binDir, "TEKRAR_DEV_DIR="+devDir,
		"TEKRAR_DEV_PG_PORT="+strconv.Itoa(ports[0]), "TEKRAR_ADDR="+addrOf(ports[1])), nil, "dev")
	code := p.wait(t, 10*time.Second)
	if code == 0 {
		t.Fatalf("exit code 0, want a failure; stderr:\n%s", p.stderr)
	}
	if s := p.stdout.String(); s != "" {
		t.Errorf("stdout is not empty:\n%s", s)
	}
	line := oneLine(t, "stderr", p.stderr.String())
	for _, want := range []string{"tekrar dev: ", "PG_BINDIR=" + binDir, "initdb", "not found"} {
		if !strings.Contains(line, want) {
			t.Errorf("stderr %q does not mention %q", line, want)
		}
	}
	if _, err := os.Stat(devDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dev directory was created although no server could run: %v", err)
	}
}
