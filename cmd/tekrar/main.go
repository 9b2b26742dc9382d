// Command tekrar is the whole product in one binary: the checkout server, its embedded
// development mode, migrations, and the commands that create clients and operators.
//
// The command line is cobra's: flags may come before or after positional arguments, each
// command's help lists only the settings it reads, and `--help` exits 0. The settings
// themselves are internal/config's, bound to each command's flags, so every one is still a
// flag and an environment variable of the same name.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/internal/config"
)

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

// run executes one command line and returns the exit code: 0 done (help included), 2 the
// command line or a setting is wrong, 1 the work failed. An error is one line on stderr,
// "tekrar <command>: <what>", and nothing on stdout.
func run(ctx context.Context, e env) int {
	root := newRoot(e)
	root.SetArgs(append([]string{}, e.args...)) // never nil: cobra would read os.Args
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var u badUsage
	if errors.As(err, &u) && u.silent {
		return 2
	}
	fmt.Fprintf(e.stderr, "%s: %v\n", cmd.CommandPath(), err)
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func newRoot(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "tekrar",
		Short: `a checkout backend in which a "pay" tap charges once`,
		Long: `tekrar: a checkout backend in which a "pay" tap charges once.

Every setting is a flag and an environment variable (each command's --help names both);
a flag wins over the environment, which wins over the default.`,
		Version:       versionLine(),
		SilenceErrors: true, // run prints the one line
		SilenceUsage:  true,
		Args:          unknownCommand,
		RunE:          groupRun,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badUsage{err: err} })
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		serveCmd(e),
		devCmd(e),
		clusterCmd(e),
		group("migrate", "apply, roll back one, or list migrations on DATABASE_URL", migrateCmds(e)...),
		group("clients", "create an API client, or change its key retention", clientsCreateCmd(e), clientsUpdateCmd(e)),
		group("operators", "set a console operator's password and role", operatorsCreateCmd(e)),
		sweepCmd(e),
		reconcileCmd(e),
		group("installments", "installment plans: charge the installments that are due", installmentsRunCmd(e)),
		settleCmd(e),
		pspCmd(e),
		versionCmd(e),
	)
	return root
}

// group is a command that only holds subcommands: without one it prints its usage to stderr
// and exits 2; with an unknown one it names it.
func group(name, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: name + " <command>", Short: short, Args: unknownCommand, RunE: groupRun}
	c.AddCommand(subs...)
	return c
}

func groupRun(cmd *cobra.Command, _ []string) error {
	fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
	return badUsage{silent: true}
}

func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return usageError("unknown command %q (want %s; see '%s --help')", args[0], strings.Join(names, ", "), cmd.CommandPath())
}

// command makes a runnable command. bind registers its settings on its flags; run is called
// with them parsed and checked, so a bad environment value stops it before any work.
func command(e env, use, short string, args cobra.PositionalArgs, bind func(*config.Set), run func(ctx context.Context, args []string) error) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: args}
	s := config.On(c.Flags(), e.getenv)
	if bind != nil {
		bind(s)
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if err := s.Check(); err != nil {
			return badUsage{err: err}
		}
		return run(cmd.Context(), args)
	}
	return c
}

// exactArgs wants exactly the arguments the usage line names.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
		case n == 0:
			return usageError("takes no arguments, got %q (usage: %s)", args, cmd.UseLine())
		default:
			return usageError("want %d argument(s), got %d (usage: %s)", n, len(args), cmd.UseLine())
		}
		return nil
	}
}

// badUsage marks the user's mistake (the command line or a setting): exit code 2. A silent
// one has been explained already (the usage was printed).
type badUsage struct {
	err    error
	silent bool
}

func (b badUsage) Error() string {
	if b.err == nil {
		return "usage"
	}
	return b.err.Error()
}

func (b badUsage) Unwrap() error { return b.err }

func usageError(format string, args ...any) error {
	return badUsage{err: fmt.Errorf(format, args...)}
}
