package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/config"
)

// clientsCmd: `tekrar clients create NAME` prints the new secret alone on one line, so that a
// script can capture it. The secret is shown once and stored only as a hash.
// `tekrar clients update ID` changes a client's key TTL or tombstone grace.
func clientsCmd(ctx context.Context, e env, args []string) error {
	const use = "tekrar clients create [--key-ttl D] [--tombstone-grace D] NAME | tekrar clients update [--key-ttl D] [--tombstone-grace D] ID"
	if len(args) == 0 || (args[0] != "create" && args[0] != "update") {
		return usageError(use)
	}
	var ttl, grace time.Duration
	pool, rest, err := openFromFlags(ctx, e, "clients "+args[0], args[1:], func(s *config.Set) {
		s.Duration(&ttl, "key-ttl", "TEKRAR_KEY_TTL", "0s", "how long a key is replayed (1m to 90d; 0: keep / the default 24h)", 0, clients.MaxKeyTTL)
		s.Duration(&grace, "tombstone-grace", "TEKRAR_TOMBSTONE_GRACE", "0s", "how long an expired key is still refused before it is forgotten (1h to 365d; 0: keep / the default 30d)", 0, clients.MaxTombstoneGrace)
	})
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(rest) != 1 {
		return usageError(use)
	}
	if args[0] == "create" {
		set := clients.DefaultSettings
		if ttl > 0 {
			set.KeyTTL = ttl
		}
		if grace > 0 {
			set.TombstoneGrace = grace
		}
		secret := clients.NewSecret()
		if _, err := clients.CreateWith(ctx, pool, rest[0], secret, set); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, secret)
		return nil
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil {
		return usageError("client id %q is not a number", rest[0])
	}
	_, set, err := clients.Get(ctx, pool, id)
	if err != nil {
		return err
	}
	if ttl > 0 {
		set.KeyTTL = ttl
	}
	if grace > 0 {
		set.TombstoneGrace = grace
	}
	if err := clients.Update(ctx, pool, id, set); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "client %d: key TTL %s, tombstone grace %s\n", id, set.KeyTTL, set.TombstoneGrace)
	return nil
}

// operatorsCmd: `tekrar operators create EMAIL` sets a console password, read from the
// first line of stdin unless --password is given (a flag shows up in ps and shell history).
// For an existing operator it is the password reset: it also ends all their sessions
// (admin.SetOperator).
func operatorsCmd(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return usageError("tekrar operators create EMAIL [--role viewer|admin] [--password P]")
	}
	var password, role string
	pool, rest, err := openFromFlags(ctx, e, "operators create", args[1:], func(s *config.Set) {
		s.String(&password, "password", "TEKRAR_OPERATOR_PASSWORD", "", "the password; unset: read from the first line of stdin")
		s.Choice(&role, "role", "TEKRAR_OPERATOR_ROLE", admin.RoleViewer, "what the operator may do", admin.RoleViewer, admin.RoleAdmin)
	})
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(rest) != 1 {
		return usageError("tekrar operators create EMAIL [--role viewer|admin] [--password P]")
	}
	if password == "" {
		line, err := bufio.NewReader(e.stdin).ReadString('\n')
		if err != nil && line == "" {
			return usageError("no password: pass --password or write it on stdin")
		}
		password = strings.TrimRight(line, "\r\n")
	}
	if err := admin.SetOperator(ctx, pool, rest[0], password, role, admin.PasswordCost); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "operator %s set (role %s)\n", strings.ToLower(strings.TrimSpace(rest[0])), role)
	return nil
}
