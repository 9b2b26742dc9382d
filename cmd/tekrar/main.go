// Command tekrar is the whole product in one binary: the checkout server, its embedded
// development mode, migrations, and the commands that create clients and operators.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `tekrar: a checkout backend in which a "pay" tap charges once.

usage: tekrar <command> [flags]

commands:
  serve                  run the HTTP server (needs DATABASE_URL)
  dev [--demo]           run the server on a private Postgres started for you
  migrate up|down|status apply, roll back one, or list migrations on DATABASE_URL
  clients create NAME    create an API client and print its secret
  clients update ID      change a client's key TTL or tombstone grace
  sweep                  run one pass of the key sweeper
  operators create EMAIL set a console operator's password (stdin or --password)
  psp                    run the sandbox payment provider as its own HTTP service

Run 'tekrar <command> --help' for a command's flags and environment variables.
`

// env is the process environment, read through one function so that tests can replace it.
type env struct {
	args   []string
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	e := env{args: os.Args[1:], getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	code := run(ctx, e)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env) int {
	if len(e.args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return 2
	}
	cmd, rest := e.args[0], e.args[1:]
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, e, rest)
	case "dev":
		err = dev(ctx, e, rest)
	case "migrate":
		err = migrate(ctx, e, rest)
	case "clients":
		err = clientsCmd(ctx, e, rest)
	case "operators":
		err = operatorsCmd(ctx, e, rest)
	case "psp":
		err = pspCmd(ctx, e, rest)
	case "sweep":
		err = sweep(ctx, e, rest)
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage)
		return 0
	default:
		fmt.Fprintf(e.stderr, "tekrar: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "tekrar %s: %v\n", cmd, err)
		return 2
	default:
		fmt.Fprintf(e.stderr, "tekrar %s: %v\n", cmd, err)
		return 1
	}
}

var errUsage = errors.New("usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}
