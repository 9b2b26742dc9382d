package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/admin"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/internal/config"
)

// clientSettings are the flags of `clients create` and `clients update`: the database and the
// client's key retention (0: the default, or unchanged).
type clientSettings struct {
	url        string
	ttl, grace time.Duration
	zone       string
	email      string
}

func (c *clientSettings) bind(s *config.Set) {
	s.DatabaseURL(&c.url, "Postgres connection string (required)")
	s.Duration(&c.ttl, "key-ttl", "TEKRAR_KEY_TTL", "0s", "how long a key is replayed (1m to 90d; 0: keep / the default 24h)", 0, clients.MaxKeyTTL)
	s.Duration(&c.grace, "tombstone-grace", "TEKRAR_TOMBSTONE_GRACE", "0s", "how long an expired key is still refused before it is forgotten (1h to 365d; 0: keep / the default 30d)", 0, clients.MaxTombstoneGrace)
	s.String(&c.zone, "time-zone", "TEKRAR_CLIENT_TIME_ZONE", "", "IANA zone of the client's business day, e.g. Europe/Istanbul (empty: keep / the default UTC)")
	s.String(&c.email, "contact-email", "TEKRAR_CLIENT_CONTACT_EMAIL", "", "where tekrar writes when one of the client's webhook endpoints is disabled (empty: keep / none; \"none\": remove it)")
}

// check refuses, before the command connects, what the database step would refuse: a value
// out of the bounds the flags cannot express (a key TTL under a minute, a zone that is no
// IANA name). The defaults are valid, so the defaults with the flags applied are valid
// exactly when the flags are.
func (c *clientSettings) check() error {
	set := clients.DefaultSettings
	c.apply(&set)
	if err := set.Validate(); err != nil {
		return badUsage{err: err}
	}
	return nil
}

func (c *clientSettings) apply(set *clients.Settings) {
	if c.ttl > 0 {
		set.KeyTTL = c.ttl
	}
	if c.grace > 0 {
		set.TombstoneGrace = c.grace
	}
	if c.zone != "" {
		set.TimeZone = c.zone
	}
	switch c.email {
	case "":
	case "none":
		set.ContactEmail = ""
	default:
		set.ContactEmail = c.email
	}
}

// clientsCreateCmd: `tekrar clients create NAME` prints the new secret alone on one line, so
// that a script can capture it. The secret is shown once and stored only as a hash.
func clientsCreateCmd(e env) *cobra.Command {
	var c clientSettings
	return command(e, "create NAME", "create an API client and print its secret", exactArgs(1), c.bind,
		func(ctx context.Context, args []string) error {
			if err := clients.CheckName(args[0]); err != nil {
				return badUsage{err: err}
			}
			if err := c.check(); err != nil {
				return err
			}
			pool, err := connect(ctx, c.url, 4)
			if err != nil {
				return err
			}
			defer pool.Close()
			set := clients.DefaultSettings
			c.apply(&set)
			secret := clients.NewSecret()
			if _, err := clients.CreateWith(ctx, pool, args[0], secret, set); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, secret)
			return nil
		})
}

// clientsUpdateCmd: `tekrar clients update ID` changes a client's key TTL or tombstone grace.
func clientsUpdateCmd(e env) *cobra.Command {
	var c clientSettings
	return command(e, "update ID", "change a client's key TTL, tombstone grace, time zone or contact e-mail", exactArgs(1), c.bind,
		func(ctx context.Context, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return usageError("client id %q is not a number", args[0])
			}
			if err := c.check(); err != nil {
				return err
			}
			pool, err := connect(ctx, c.url, 4)
			if err != nil {
				return err
			}
			defer pool.Close()
			_, set, err := clients.Get(ctx, pool, id)
			if err != nil {
				return err
			}
			c.apply(&set)
			if err := clients.Update(ctx, pool, id, set); err != nil {
				return err
			}
			contact := set.ContactEmail
			if contact == "" {
				contact = "none"
			}
			fmt.Fprintf(e.stdout, "client %d: key TTL %s, tombstone grace %s, time zone %s, contact e-mail %s\n", id, set.KeyTTL, set.TombstoneGrace, set.TimeZone, contact)
			return nil
		})
}

// operatorsCreateCmd: `tekrar operators create EMAIL` sets a console password, read from the
// first line of stdin unless --password is given (a flag shows up in ps and shell history).
// For an existing operator it is the password reset: it also ends all their sessions
// (admin.SetOperator).
func operatorsCreateCmd(e env) *cobra.Command {
	var url, password, role string
	return command(e, "create EMAIL", "set a console operator's password (stdin or --password) and role", exactArgs(1),
		func(s *config.Set) {
			s.DatabaseURL(&url, "Postgres connection string (required)")
			s.String(&password, "password", "TEKRAR_OPERATOR_PASSWORD", "", "the password; unset: read from the first line of stdin")
			s.Choice(&role, "role", "TEKRAR_OPERATOR_ROLE", admin.RoleViewer, "what the operator may do", admin.RoleViewer, admin.RoleAdmin)
		},
		func(ctx context.Context, args []string) error {
			if password == "" {
				line, err := bufio.NewReader(e.stdin).ReadString('\n')
				if err != nil && line == "" {
					return usageError("no password: pass --password or write it on stdin")
				}
				password = strings.TrimRight(line, "\r\n")
			}
			if err := admin.CheckOperator(args[0], password, role); err != nil {
				return badUsage{err: err}
			}
			pool, err := connect(ctx, url, 4)
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := admin.SetOperator(ctx, pool, args[0], password, role, admin.PasswordCost); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "operator %s set (role %s)\n", strings.ToLower(strings.TrimSpace(args[0])), role)
			return nil
		})
}
