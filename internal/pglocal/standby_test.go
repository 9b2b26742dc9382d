package pglocal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/server"
)

// startStandby makes a streaming standby of primary (Options.StandbyOf) listening on port.
func startStandby(t *testing.T, primary *Server, port int) *Server {
	t.Helper()
	return startServer(t, Options{Port: port, StandbyOf: primary})
}

// hostsURL is a DATABASE_URL naming several local servers the way lib/pq reads them: the
// host and port lists in the query, tried in order; attrs, if set, is target_session_attrs.
func hostsURL(attrs string, ports ...int) string {
	hosts, ps := make([]string, len(ports)), make([]string, len(ports))
	for i, p := range ports {
		hosts[i], ps[i] = "127.0.0.1", strconv.Itoa(p)
	}
	u := fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%s&sslmode=disable",
		strings.Join(hosts, ","), strings.Join(ps, ","))
	if attrs != "" {
		u += "&target_session_attrs=" + attrs
	}
	return u
}

// A DATABASE_URL listing a standby first and the primary second, with
// target_session_attrs=read-write, reaches the primary and writes there: so a replica whose URL
// names every node finds the primary after a failover without a proxy. The standby alone with
// read-write is refused, the authority form (h1:p1,h2:p2) is not understood at all, and the
// readiness check /readyz runs (server.Writable) says not ready on the standby and ready on
// the primary.
func TestSeveralHosts(t *testing.T) {
	primaryPort, standbyPort := freePort(t), freePort(t)
	primary := startServer(t, Options{Port: primaryPort})
	exec1(t, open(t, primary.URL("postgres")), "CREATE TABLE written (n int)")
	standby := startStandby(t, primary, standbyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	inRecovery := func(t *testing.T, url string) bool {
		t.Helper()
		var recovery bool
		if err := open(t, url).QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil {
			t.Fatalf("pg_is_in_recovery over %s: %v", url, err)
		}
		return recovery
	}
	if !inRecovery(t, standby.TCPURL("postgres")) {
		t.Fatalf("the server on port %d is not a standby", standbyPort)
	}

	t.Run("standby first, primary second, read-write", func(t *testing.T) {
		url := hostsURL("read-write", standbyPort, primaryPort)
		if inRecovery(t, url) {
			t.Fatalf("%s connected to a standby", url)
		}
		db := open(t, url)
		var port int
		if err := db.QueryRowContext(ctx, "SELECT inet_server_port()").Scan(&port); err != nil || port != primaryPort {
			t.Errorf("connected to port %d (%v), want the primary's %d", port, err, primaryPort)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO written VALUES (1)"); err != nil {
			t.Errorf("write over %s: %v", url, err)
		}
	})

	t.Run("standby only, read-write", func(t *testing.T) {
		url := hostsURL("read-write", standbyPort)
		if err := open(t, url).PingContext(ctx); err == nil {
			t.Errorf("%s connected: want no acceptable host", url)
		}
	})

	t.Run("hosts in the authority", func(t *testing.T) {
		url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
			standbyPort, primaryPort)
		if err := open(t, url).PingContext(ctx); err == nil {
			t.Errorf("%s connected: lib/pq now reads hosts in the authority, update docs/operations.md", url)
		}
	})

	t.Run("readiness", func(t *testing.T) {
		err := server.Writable(open(t, hostsURL("", standbyPort)))(ctx)
		if !errors.Is(err, server.ErrReadOnly) {
			t.Errorf("readiness on the standby: %v, want %v", err, server.ErrReadOnly)
		}
		if err := server.Writable(open(t, hostsURL("", primaryPort)))(ctx); err != nil {
			t.Errorf("readiness on the primary: %v, want ready", err)
		}
	})
}
