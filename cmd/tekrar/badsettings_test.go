package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// canaryDB is a database URL whose "server" only counts the connections made to it: a
// command that was refused before it did any work never dialled it.
func canaryDB(t *testing.T) (url string, dialled func() int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return "postgres://tekrar@" + ln.Addr().String() + "/tekrar?sslmode=disable&connect_timeout=2", n.Load
}

// reachableDir is an empty directory that the postgres OS user may enter (t.TempDir()'s
// parent is not, and the private Postgres runs as that user when tests run as root), so
// that dev gets past that check and a test sees whether it would start its Postgres.
func reachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tekrar-devtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestEveryBadInputExitsTwoBeforeAnyWork: `dev --addr nonsense` and `--secrets-key notbase64`
// failed only after the private Postgres had started, with exit 1; a bad e-mail, a short
// password, a bad time zone, a key TTL under its minimum and an empty client name exited 1
// after connecting. Every setting, flag and argument is now checked first: exit 2, one line
// naming what is wrong, no database dialled and no dev directory created.
func TestEveryBadInputExitsTwoBeforeAnyWork(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  []string
		args []string
		want string // in the one line
	}{
		{"dev addr", nil, []string{"dev", "--addr", "nonsense"}, "--addr"},
		{"dev addr port", nil, []string{"dev", "--addr", "127.0.0.1:99999"}, "port"},
		{"dev addr env", []string{"TEKRAR_ADDR=nonsense"}, []string{"dev"}, "TEKRAR_ADDR"},
		{"dev metrics addr", nil, []string{"dev", "--metrics-addr", "nonsense"}, "--metrics-addr"},
		{"dev secrets key", nil, []string{"dev", "--secrets-key", "notbase64"}, "--secrets-key"},
		{"dev secrets key short", []string{"TEKRAR_SECRETS_KEY=c2hvcnQ="}, []string{"dev"}, "TEKRAR_SECRETS_KEY"},
		{"dev psp webhook secret", nil, []string{"dev", "--psp-webhook-secret", "hunter2"}, "--psp-webhook-secret"},
		{"serve addr", nil, []string{"serve", "--addr", "nonsense"}, "--addr"},
		{"serve secrets key", nil, []string{"serve", "--secrets-key", "notbase64"}, "--secrets-key"},
		{"serve psp webhook secret", []string{"TEKRAR_PSP_WEBHOOK_SECRET=whsec_%%%"}, []string{"serve"}, "TEKRAR_PSP_WEBHOOK_SECRET"},
		{"serve stripe without its key", nil, []string{"serve", "--provider", "stripe"}, "TEKRAR_STRIPE_SECRET_KEY"},
		{"dev stripe publishable key", nil, []string{"dev", "--provider", "stripe", "--stripe-secret-key", "pk_test_hunter2"}, "--stripe-secret-key"},
		{"serve stripe webhook secret", []string{"TEKRAR_STRIPE_WEBHOOK_SECRET=hunter2"}, []string{"serve"}, "TEKRAR_STRIPE_WEBHOOK_SECRET"},
		{"psp addr", nil, []string{"psp", "--addr", "nonsense"}, "--addr"},
		{"psp webhook secret", nil, []string{"psp", "--webhook-url", "http://127.0.0.1:1/h", "--webhook-secret", "nope"}, "--webhook-secret"},
		{"psp webhook url without secret", nil, []string{"psp", "--webhook-url", "http://127.0.0.1:1/h"}, "--webhook-secret"},
		{"clients create empty name", nil, []string{"clients", "create", " "}, "name"},
		{"clients create short ttl", nil, []string{"clients", "create", "x", "--key-ttl", "30s"}, "key"},
		{"clients create short grace", nil, []string{"clients", "create", "x", "--tombstone-grace", "30m"}, "tombstone"},
		{"clients create time zone", nil, []string{"clients", "create", "x", "--time-zone", "Mars/Olympus"}, "Mars/Olympus"},
		{"clients update id", nil, []string{"clients", "update", "abc"}, "abc"},
		{"clients update short ttl", nil, []string{"clients", "update", "1", "--key-ttl", "30s"}, "key"},
		{"clients update time zone", nil, []string{"clients", "update", "1", "--time-zone", "Mars/Olympus"}, "Mars/Olympus"},
		{"operators create email", nil, []string{"operators", "create", "not-an-email", "--password", "long enough password"}, "not-an-email"},
		{"operators create short password", nil, []string{"operators", "create", "a@example.com", "--password", "short"}, "password"},
		{"operators create long password", nil, []string{"operators", "create", "a@example.com", "--password", strings.Repeat("x", 73)}, "password"},
		{"settle date", nil, []string{"settle", "--date", "yesterday"}, "--date"},
		{"reconcile since", nil, []string{"reconcile", "--since", "last week"}, "--since"},
		{"installments at", nil, []string{"installments", "run", "--at", "soon"}, "--at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			devDir := filepath.Join(reachableDir(t), "dev")
			env := []string{"TEKRAR_DEV_DIR=" + devDir, "TEKRAR_DEV_PG_PORT=" + strconv.Itoa(freePorts(t, 1)[0])}
			dbURL, dialled := canaryDB(t)
			if tc.args[0] != "dev" {
				env = append(env, "DATABASE_URL="+dbURL)
			}
			started := time.Now()
			stdout, stderr, code := runTekrar(t, childEnv(append(env, tc.env...)...), strings.NewReader(""), tc.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 2 and nothing\nstderr: %s", code, stdout, stderr)
			}
			line := oneLine(t, "stderr", stderr)
			if !strings.Contains(line, tc.want) {
				t.Errorf("stderr %q does not name %q", line, tc.want)
			}
			if n := dialled(); n != 0 {
				t.Errorf("the database was dialled %d times before the input was refused", n)
			}
			if _, err := os.Stat(devDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the dev directory was created before the input was refused: %v", err)
			}
			if took := time.Since(started); took > 10*time.Second {
				t.Errorf("refusing took %v", took)
			}
		})
	}
}

// TestBusyPortFailsBeforeServing: with the listen address taken, serve logged "tekrar
// serving" and dev started its Postgres before the bind failed. The address is bound first.
func TestBusyPortFailsBeforeServing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() }) // not defer: the parallel subtests run after this returns
	for _, command := range []string{"serve", "dev"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			devDir := filepath.Join(reachableDir(t), "dev")
			dbURL, dialled := canaryDB(t)
			env := []string{"TEKRAR_ADDR=" + ln.Addr().String(), "TEKRAR_DEV_DIR=" + devDir,
				"TEKRAR_DEV_PG_PORT=" + strconv.Itoa(freePorts(t, 1)[0])}
			if command == "serve" {
				env = append(env, "DATABASE_URL="+dbURL)
			}
			stdout, stderr, code := runTekrar(t, childEnv(env...), nil, command)
			if code != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 1 and nothing\nstderr: %s", code, stdout, stderr)
			}
			if strings.Contains(stderr, "serving") {
				t.Errorf("stderr says it is serving:\n%s", stderr)
			}
			if !strings.Contains(stderr, ln.Addr().String()) {
				t.Errorf("stderr does not name the busy address:\n%s", stderr)
			}
			if n := dialled(); n != 0 {
				t.Errorf("the database was dialled %d times before the bind failed", n)
			}
			if _, err := os.Stat(devDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the dev directory was created before the bind failed: %v", err)
			}
		})
	}
}
