package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/config"
)

// clientsCmd: `tekrar clients create NAME` prints the new secret alone on one line, so that a
// script can capture it. The secret is shown once and stored only as a hash.
func clientsCmd(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return usageError("tekrar clients create NAME")
	}
	pool, rest, err := openFromFlags(ctx, e, "clients create", args[1:])
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(rest) != 1 {
		return usageError("tekrar clients create NAME")
	}
	secret := clients.NewSecret()
	if _, err := clients.Create(ctx, pool, rest[0], secret); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, secret)
	return nil
}

// operatorsCmd: `tekrar operators create EMAIL` sets a console password, read from the
// first line of stdin unless --password is given (a flag shows up in ps and shell history).
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
