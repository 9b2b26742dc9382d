package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestFlagsAfterArguments: on the standard flag package, parsing stopped at the first
// positional argument, so the README's own `operators create EMAIL --role admin` exited 2
// and `migrate status --database-url URL` said the URL was required. Flags go anywhere now.
func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := childEnv() // no DATABASE_URL: the flag must carry it

	if out := mustRun(t, env, nil, "migrate", "status", "--database-url", dbURL); !strings.Contains(out, "applied") {
		t.Errorf("migrate status --database-url printed %q", out)
	}
	out := mustRun(t, env, nil, "operators", "create", "Late@Example.com", "--role", "admin", "--password", "correct horse battery", "--database-url", dbURL)
	if strings.TrimSpace(out) != "operator late@example.com set (role admin)" {
		t.Errorf("operators create printed %q", out)
	}
	if n := countRows(t, db, `SELECT count(*) FROM operators WHERE email = 'late@example.com' AND role = 'admin'`); n != 1 {
		t.Errorf("%d admin operators late@example.com, want 1", n)
	}
	mustRun(t, env, nil, "clients", "create", "POS fleet", "--key-ttl", "48h", "--database-url="+dbURL)
	if n := countRows(t, db, `SELECT count(*) FROM clients WHERE name = 'POS fleet' AND key_ttl = interval '48 hours'`); n != 1 {
		t.Errorf("%d clients 'POS fleet' with a 48h key TTL, want 1", n)
	}
	// Interleaved, and with "--" ending the flags.
	mustRun(t, env, nil, "clients", "--database-url", dbURL, "create", "--key-ttl", "2h", "--", "--odd name")
	if n := countRows(t, db, `SELECT count(*) FROM clients WHERE name = '--odd name' AND key_ttl = interval '2 hours'`); n != 1 {
		t.Errorf("%d clients '--odd name', want 1", n)
	}
}

// helpFlag matches one flag line of cobra's help: "  -h, --help   help for x".
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--([a-z0-9-]+)`)

// serverSettings are the flag names BindServer registers for command.
func serverSettings(command string) []string {
	var c config.Server
	s := config.NewSet(command, func(string) string { return "" }, nil)
	if command == "sweep" {
		config.BindSweep(s, &c)
	} else {
		config.BindServer(s, command, &c)
	}
	var out []string
	for _, v := range s.Settings() {
		out = append(out, v[0])
	}
	return out
}

// TestHelpExitsZeroAndListsOnlyItsSettings: `clients --help` exited 2, `sweep --help` listed
// every server setting, and usage lines did not name their arguments.
func TestHelpExitsZeroAndListsOnlyItsSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args  []string
		usage string   // in the help's usage line
		flags []string // exactly these, besides --help
	}{
		{[]string{}, "tekrar [command]", []string{"version"}},
		{[]string{"serve"}, "tekrar serve [flags]", serverSettings("serve")},
		{[]string{"dev"}, "tekrar dev [flags]", serverSettings("dev")},
		{[]string{"dev", "reset"}, "tekrar dev reset [flags]", []string{"dev-dir"}},
		{[]string{"cluster"}, "tekrar cluster [flags]", []string{"cluster-dir"}},
		{[]string{"sweep"}, "tekrar sweep [flags]", []string{"database-url", "log-format", "log-level", "sweep-batch", "sweep-pause", "sweep-settle", "event-retention"}},
		{[]string{"reconcile"}, "tekrar reconcile [flags]", []string{"database-url", "log-format", "log-level", "psp-url", "provider-timeout", "provider-horizon", "lease", "since", "until", "crash-at", "crash-rate", "clock-shift"}},
		{[]string{"installments"}, "tekrar installments [command]", nil},
		{[]string{"installments", "run"}, "tekrar installments run [flags]", []string{"database-url", "log-format", "log-level", "psp-url", "provider-timeout", "lease", "at", "crash-at", "crash-rate", "clock-shift"}},
		{[]string{"settle"}, "tekrar settle [flags]", []string{"database-url", "log-format", "log-level", "date", "client"}},
		{[]string{"psp"}, "tekrar psp [flags]", []string{"database-url", "addr", "slow-delay", "no-cancel", "keyless", "webhook-url", "webhook-secret", "webhook-duplicate", "webhook-delay", "webhook-delay-for", "shutdown-timeout"}},
		{[]string{"psp", "refund"}, "tekrar psp refund CHARGE_ID [flags]", []string{"psp-url", "json", "amount", "reason"}},
		{[]string{"psp", "dispute"}, "tekrar psp dispute CHARGE_ID [flags]", []string{"psp-url", "json", "amount", "reason"}},
		{[]string{"psp", "close-dispute"}, "tekrar psp close-dispute DISPUTE_ID [flags]", []string{"psp-url", "json", "outcome"}},
		{[]string{"migrate"}, "tekrar migrate [command]", nil},
		{[]string{"migrate", "up"}, "tekrar migrate up [flags]", []string{"database-url"}},
		{[]string{"migrate", "down"}, "tekrar migrate down [flags]", []string{"database-url"}},
		{[]string{"migrate", "status"}, "tekrar migrate status [flags]", []string{"database-url"}},
		{[]string{"clients"}, "tekrar clients [command]", nil},
		{[]string{"clients", "create"}, "tekrar clients create NAME [flags]", []string{"contact-email", "database-url", "key-ttl", "time-zone", "tombstone-grace"}},
		{[]string{"clients", "update"}, "tekrar clients update ID [flags]", []string{"contact-email", "database-url", "key-ttl", "time-zone", "tombstone-grace"}},
		{[]string{"operators"}, "tekrar operators [command]", nil},
		{[]string{"operators", "create"}, "tekrar operators create EMAIL [flags]", []string{"database-url", "password", "role"}},
		{[]string{"version"}, "tekrar version [flags]", nil},
	}
	for _, tc := range cases {
		for _, help := range []string{"--help", "-h"} {
			args := append(slices.Clone(tc.args), help)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				stdout, stderr, code := runTekrar(t, childEnv(), nil, args...)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
				}
				if !strings.Contains(stdout, tc.usage) {
					t.Errorf("help does not show the usage %q:\n%s", tc.usage, stdout)
				}
				var got []string
				for _, m := range helpFlag.FindAllStringSubmatch(stdout, -1) {
					if m[1] != "help" {
						got = append(got, m[1])
					}
				}
				want := slices.Clone(tc.flags)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("help lists flags %v, want %v:\n%s", got, want, stdout)
				}
				if len(tc.args) > 0 && len(want) > 0 && !strings.Contains(stdout, "(env ") {
					t.Errorf("help does not name the environment variables:\n%s", stdout)
				}
			})
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out := mustRun(t, childEnv(), nil, args...)
		line := oneLine(t, "version", out)
		for _, want := range []string{"tekrar", "github.com/tekrar/tekrar", "go1."} {
			if !strings.Contains(line, want) {
				t.Errorf("tekrar %v printed %q: no %q", args, line, want)
			}
		}
	}
}

// TestWrongValueListsValidOnes: a bad value is refused in one line, exit 2, saying what
// would have been accepted, in the unit the user wrote.
func TestWrongValueListsValidOnes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"serve", "--log-level", "loud"}, `"loud" is not one of debug, info, warn, error`},
		{[]string{"TEKRAR_LOG_LEVEL=loud"}, []string{"sweep"}, `TEKRAR_LOG_LEVEL: "loud" is not one of debug, info, warn, error`},
		{nil, []string{"serve", "--log-format", "xml"}, `"xml" is not one of json, text`},
		{nil, []string{"operators", "create", "a@example.com", "--role", "root"}, `"root" is not one of viewer, admin`},
		{nil, []string{"clients", "create", "x", "--key-ttl", "91d"}, `"91d" is out of range: from 0d to 90d`},
		{nil, []string{"serve", "--lease", "90m"}, `"90m" is out of range: from 1s to 60m`},
		{[]string{"TEKRAR_DOUBLE_TAP_WINDOW=25h"}, []string{"serve"}, `"25h" is out of range: from 1s to 24h`},
		{nil, []string{"operators", "create"}, "tekrar operators create EMAIL"},
		{nil, []string{"clients", "update", "1", "2"}, "tekrar clients update ID"},
		{nil, []string{"migrate", "sideways"}, `unknown command "sideways"`},
		{nil, []string{"nonesuch"}, `unknown command "nonesuch"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runTekrar(t, childEnv(tc.env...), nil, tc.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 2 and nothing\nstderr: %s", code, stdout, stderr)
			}
			if line := oneLine(t, "stderr", stderr); !strings.Contains(line, tc.want) {
				t.Errorf("stderr %q does not say %q", line, tc.want)
			}
		})
	}
}

// readmeSection returns the lines of README.md from the heading to the next one.
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## "+heading
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	return out
}

// TestREADMEConfigurationTableMatchesHelp: the README's table of settings missed some that
// `--help` lists. Every environment variable serve's and dev's help name is in the table,
// and every one in the table is in their help, except those the binary does not read as a
// setting (the tests' and pglocal's own).
func TestREADMEConfigurationTableMatchesHelp(t *testing.T) {
	t.Parallel()
	notSettings := map[string]bool{"PG_BINDIR": true, "TEST_DATABASE_URL": true}
	envName := regexp.MustCompile(`\(env ([A-Z_]+)\)`)
	inHelp := map[string]bool{}
	for _, command := range []string{"serve", "dev"} {
		out := mustRun(t, childEnv(), nil, command, "--help")
		for _, m := range envName.FindAllStringSubmatch(out, -1) {
			inHelp[m[1]] = true
		}
	}
	if len(inHelp) < 20 {
		t.Fatalf("help names only %d environment variables: %v", len(inHelp), inHelp)
	}
	inTable := map[string]bool{}
	cell := regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	for _, line := range readmeSection(t, "Configuration") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			inTable[m[1]] = true
		}
	}
	for name := range inHelp {
		if !inTable[name] {
			t.Errorf("%s is in --help but not in README's configuration table", name)
		}
	}
	for name := range inTable {
		if !inHelp[name] && !notSettings[name] {
			t.Errorf("%s is in README's configuration table but in neither serve's nor dev's --help", name)
		}
	}
}

// shellWords splits a README command line as sh would for the plain quoting it uses: words
// separated by spaces, '...' and "..." quoting, a # comment at the end.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case ch == '#' && !inWord:
			return words
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\'' || ch == '"':
			j := strings.IndexByte(line[i+1:], ch)
			if j < 0 {
				t.Fatalf("unterminated quote in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestREADMECommandsRun runs the README's "existing Postgres" command lines that finish
// offline (all but serve) against a throwaway database, as written: the README's own
// `operators create EMAIL --role admin` used to exit 2.
func TestREADMECommandsRun(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	db := openDB(t, dbURL)
	env := childEnv("DATABASE_URL=" + dbURL)
	ran := 0
	for _, line := range readmeSection(t, "Running against an existing Postgres") {
		words := shellWords(t, line)
		if len(words) < 3 || words[0] != "go" || words[1] != "run" || words[2] != "./cmd/tekrar" {
			continue
		}
		args := words[3:]
		if len(args) > 0 && args[0] == "serve" {
			continue // runs until stopped; serve is covered by serve_test.go
		}
		mustRun(t, env, strings.NewReader("correct horse battery\n"), args...)
		ran++
	}
	if ran < 3 {
		t.Fatalf("ran %d README command lines, want at least migrate, clients and operators", ran)
	}
	if n := countRows(t, db, `SELECT count(*) FROM clients`); n != 1 {
		t.Errorf("%d clients after the README's commands, want 1", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM operators WHERE role = 'admin'`); n != 1 {
		t.Errorf("%d admin operators after the README's commands, want 1", n)
	}
}

// TestDevReset: `tekrar dev reset` deletes the private Postgres's directory, and only that:
// not a directory without a cluster in it, not one whose postmaster runs.
func TestDevReset(t *testing.T) {
	t.Parallel()
	cluster := func(t *testing.T) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "pg")
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "PG_VERSION"), []byte("16\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	t.Run("removes a stopped cluster", func(t *testing.T) {
		dir := cluster(t)
		out := mustRun(t, childEnv("TEKRAR_DEV_DIR="+dir), nil, "dev", "reset")
		if exists(dir) || !strings.Contains(out, "removed "+dir) {
			t.Fatalf("dir still there: %v; printed %q", exists(dir), out)
		}
		out = mustRun(t, childEnv(), nil, "dev", "reset", "--dev-dir", dir)
		if !strings.Contains(out, "nothing to reset") {
			t.Fatalf("second reset printed %q", out)
		}
	})
	t.Run("refuses a directory without a cluster", func(t *testing.T) {
		dir := t.TempDir()
		keep := filepath.Join(dir, "notes.txt")
		if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runTekrar(t, childEnv(), nil, "dev", "reset", "--dev-dir", dir)
		if code == 0 || !exists(keep) {
			t.Fatalf("exit %d, file kept %v", code, exists(keep))
		}
		if line := oneLine(t, "stderr", stderr); !strings.Contains(line, "no private Postgres") {
			t.Errorf("stderr %q", line)
		}
	})
	t.Run("refuses a running cluster", func(t *testing.T) {
		dir := cluster(t)
		data := filepath.Join(dir, "data")
		// A stand-in postmaster: a live process working in the data directory, as postgres does.
		sleeper := exec.Command("sleep", "60")
		sleeper.Dir = data
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
		pid := strconv.Itoa(sleeper.Process.Pid)
		if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(pid+"\n"+data+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runTekrar(t, childEnv(), nil, "dev", "reset", "--dev-dir", dir)
		if code == 0 || !exists(filepath.Join(data, "PG_VERSION")) {
			t.Fatalf("exit %d, cluster kept %v", code, exists(data))
		}
		if line := oneLine(t, "stderr", stderr); !strings.Contains(line, "pid "+pid) {
			t.Errorf("stderr %q does not name the running postmaster", line)
		}
	})
}
