// Package config is tekrar's one configuration loader. Every setting has an environment
// variable (TEKRAR_..., plus DATABASE_URL) and a matching flag; a flag wins over the
// environment, which wins over the default. Everything is parsed and checked before the
// process does any work, so a bad value fails at start with a message naming the setting,
// never at the first request.
package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tekrar/tekrar/checkout/stdwebhook"
)

// Set is a group of settings bound to one command's flags. The flags are pflag flags, so that
// a cobra command can carry them (On) and they may come before or after positional
// arguments; NewSet makes a stand-alone set for callers without a command.
type Set struct {
	fs     *pflag.FlagSet
	getenv func(string) string
	errs   map[string]error // per flag name; a valid flag clears a bad environment value
	vars   []setting
	// checks are the rules between settings (one that another requires), run by Check
	// after every single value was read.
	checks []func() error
}

// Require adds a rule between settings, checked once they are all read: check returns the
// error to report, or nil.
func (s *Set) Require(check func() error) { s.checks = append(s.checks, check) }

type setting struct {
	flag, env, def, usage string
}

// NewSet starts a stand-alone set for the named command. getenv is os.Getenv outside tests.
func NewSet(command string, getenv func(string) string, output io.Writer) *Set {
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	fs.SetOutput(output)
	s := On(fs, getenv)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tekrar %s [flags]\n\n%s\n%s", command, EnvNote, fs.FlagUsages())
	}
	return s
}

// On binds a set to the flags of a command (a cobra command's Flags()).
func On(fs *pflag.FlagSet, getenv func(string) string) *Set {
	return &Set{fs: fs, getenv: getenv, errs: make(map[string]error)}
}

// EnvNote heads a list of flags in help.
const EnvNote = "Every flag can also be set by the environment variable named after it; a flag wins.\n"

// value is one setting's flag: it converts the text when the flag is given and then clears a
// bad environment value of the same setting.
type value struct {
	s      *Set
	name   string
	kind   string // shown in help: duration, int, string...
	text   string
	conv   func(string) error
	isBool bool
}

func (v *value) String() string { return v.text }
func (v *value) Type() string   { return v.kind }
func (v *value) Set(t string) error {
	if err := v.conv(t); err != nil {
		return err
	}
	v.text = t
	delete(v.s.errs, v.name)
	return nil
}

// IsBoolFlag lets pflag print a bool flag without a value name.
func (v *value) IsBoolFlag() bool { return v.isBool }

// parse registers one setting whose text is turned into a value by conv.
func (s *Set) parse(name, env, def, usage, kind string, conv func(string) error) *pflag.Flag {
	s.vars = append(s.vars, setting{name, env, def, usage})
	initial := def
	source := "default"
	if v := s.getenv(env); v != "" {
		initial, source = v, env
	}
	if err := conv(initial); err != nil {
		s.errs[name] = fmt.Errorf("%s: %w", sourceName(source, env, name), err)
	}
	v := &value{s: s, name: name, kind: kind, text: def, conv: conv}
	f := s.fs.VarPF(v, name, "", usage+" (env "+env+")")
	f.DefValue = def
	return f
}

func sourceName(source, env, name string) string {
	if source == "default" {
		return "--" + name + " default"
	}
	return env
}

// String binds a text setting.
func (s *Set) String(p *string, name, env, def, usage string) {
	s.parse(name, env, def, usage, "string", func(v string) error { *p = v; return nil })
}

// ParseDuration is time.ParseDuration plus a day unit: "30d", "1d12h". Retention periods
// are counted in days, and "720h" is a poor way to write a month.
func ParseDuration(v string) (time.Duration, error) {
	if i := strings.Index(v, "d"); i > 0 {
		days, err := strconv.Atoi(v[:i])
		if err != nil || days < 0 || days > 100000 {
			return 0, fmt.Errorf("%q is not a duration (examples: 500ms, 30s, 24h, 30d)", v)
		}
		d := time.Duration(days) * 24 * time.Hour
		if rest := v[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil {
				return 0, fmt.Errorf("%q is not a duration (examples: 500ms, 30s, 24h, 30d)", v)
			}
			d += r
		}
		return d, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (examples: 500ms, 30s, 24h, 30d)", v)
	}
	return d, nil
}

// Duration binds a duration setting that must lie within [min, max]. Out of range, the
// message gives the range in the unit the value was written in ("91d": 0d to 90d), so that
// nobody has to convert 2160h0m0s back to days.
func (s *Set) Duration(p *time.Duration, name, env, def, usage string, min, max time.Duration) {
	s.parse(name, env, def, usage, "duration", func(v string) error {
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		if d < min || d > max {
			return fmt.Errorf("%q is out of range: %s", v, durationRange(min, max, unitOf(v)))
		}
		*p = d
		return nil
	})
}

// durationRange says "from min to max" in unit, and adds the plain form when unit makes it
// hard to read ("from 1000ms to 3600000ms (from 1s to 1h)").
func durationRange(min, max time.Duration, unit string) string {
	in := func(d time.Duration, unit string) string {
		if d == 0 && unit != "" {
			return "0" + unit
		}
		return FormatDuration(d, unit)
	}
	r := fmt.Sprintf("from %s to %s", in(min, unit), in(max, unit))
	plainMin := FormatDuration(min, "")
	if min == 0 {
		plainMin = in(0, unit)
	}
	if plain := fmt.Sprintf("from %s to %s", plainMin, FormatDuration(max, "")); plain != r {
		r += " (" + plain + ")"
	}
	return r
}

// durationUnits are ParseDuration's units, longest first so that "ms" is not read as "m".
var durationUnits = []struct {
	name string
	d    time.Duration
}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"ms", time.Millisecond}, {"m", time.Minute}, {"s", time.Second},
	{"us", time.Microsecond}, {"µs", time.Microsecond}, {"ns", time.Nanosecond}}

// unitOf is the first unit written in a duration ("1d12h": d), or "" if there is none.
func unitOf(v string) string {
	i := strings.IndexFunc(v, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+') })
	if i < 0 {
		return ""
	}
	for _, u := range durationUnits {
		if strings.HasPrefix(v[i:], u.name) {
			return u.name
		}
	}
	return ""
}

// FormatDuration writes d in unit ("d", "h", "m", "s", "ms", ...) when it is a whole number
// of them, and otherwise as compactly as ParseDuration reads it back: 90d, 1h, 1m30s.
func FormatDuration(d time.Duration, unit string) string {
	for _, u := range durationUnits {
		if u.name == unit && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if days := d / (24 * time.Hour); days > 0 {
		fmt.Fprintf(&b, "%dd", days)
		d -= days * 24 * time.Hour
		if d == 0 {
			return b.String()
		}
	}
	t := d.String() // 1h0m0s, 1m30s, 500ms: drop the zero parts
	if strings.HasSuffix(t, "m0s") {
		t = strings.TrimSuffix(t, "0s")
	}
	if strings.HasSuffix(t, "h0m") {
		t = strings.TrimSuffix(t, "0m")
	}
	return b.String() + t
}

// Int binds an integer setting that must lie within [min, max].
func (s *Set) Int(p *int, name, env, def, usage string, min, max int) {
	s.parse(name, env, def, usage, "int", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if n < min || n > max {
			return fmt.Errorf("%d is out of range: from %d to %d", n, min, max)
		}
		*p = n
		return nil
	})
}

// Bool binds a true/false setting; the flag alone (--demo) means true.
func (s *Set) Bool(p *bool, name, env, def, usage string) {
	f := s.parse(name, env, def, usage, "bool", func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
		return nil
	})
	f.NoOptDefVal = "true"
	f.Value.(*value).isBool = true
}

// Choice binds a setting that must be one of the given words.
func (s *Set) Choice(p *string, name, env, def, usage string, choices ...string) {
	s.parse(name, env, def, usage+" ("+strings.Join(choices, "|")+")", "string", func(v string) error {
		if slices.Contains(choices, v) {
			*p = v
			return nil
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(choices, ", "))
	})
}

// Level binds a log level: one of the four names (any case), as slog reads them.
func (s *Set) Level(p *slog.Level, name, env, def, usage string) {
	s.parse(name, env, def, usage+" (debug|info|warn|error)", "level", func(v string) error {
		if err := p.UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("%q is not one of debug, info, warn, error", v)
		}
		return nil
	})
}

// DatabaseURL binds a Postgres connection string; empty is allowed here and checked by the
// command that needs it.
func (s *Set) DatabaseURL(p *string, usage string) {
	s.parse("database-url", "DATABASE_URL", "", usage, "url", func(v string) error {
		if err := CheckDatabaseURL(v); err != nil {
			return err
		}
		*p = v
		return nil
	})
}

// URL binds an http(s) URL; empty is allowed (def "" means unset by default).
func (s *Set) URL(p *string, name, env, def, usage string) {
	s.parse(name, env, def, usage, "url", func(v string) error {
		if v == "" {
			*p = ""
			return nil
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q is not an http(s) URL", v)
		}
		*p = strings.TrimRight(v, "/")
		return nil
	})
}

// CheckDatabaseURL accepts a postgres:// URL or a key=value connection string, without
// printing the value (it may hold a password).
func CheckDatabaseURL(v string) error {
	if v == "" {
		return nil
	}
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		if _, err := url.Parse(v); err != nil {
			return errors.New("not a valid postgres:// URL")
		}
		return nil
	}
	if strings.Contains(v, "=") && !strings.Contains(v, "://") {
		return nil
	}
	return errors.New("not a postgres:// URL or a key=value connection string")
}

// Addr binds a TCP listen address, host:port (the host may be empty: every interface; the
// port a number up to 65535, 0 for any free one). Empty is allowed only when the default is
// empty, meaning "not served". A typo is refused here, before anything starts, rather than
// by the listener after a database was opened.
func (s *Set) Addr(p *string, name, env, def, usage string) {
	s.parse(name, env, def, usage, "host:port", func(v string) error {
		if v == "" && def == "" {
			*p = ""
			return nil
		}
		if err := CheckAddr(v); err != nil {
			return err
		}
		*p = v
		return nil
	})
}

// CheckAddr accepts a listen address as net.Listen("tcp", ...) reads it.
func CheckAddr(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%q is not a listen address host:port (examples: :8080, 127.0.0.1:8080)", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535", v)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q is not a listen address host:port (examples: :8080, 127.0.0.1:8080)", v)
	}
	return nil
}

// SecretsKey binds a 256-bit key in its text form, standard base64 of 32 bytes (what
// `openssl rand -base64 32` prints); empty is allowed (no key).
func (s *Set) SecretsKey(p *string, name, env, usage string) {
	s.parse(name, env, "", usage, "base64", func(v string) error {
		if v != "" {
			if k, err := base64.StdEncoding.DecodeString(v); err != nil || len(k) != 32 {
				return errors.New("not the base64 of 32 random bytes (openssl rand -base64 32)")
			}
		}
		*p = v
		return nil
	})
}

// WebhookSecrets binds Standard Webhooks signing secrets (whsec_ and base64), comma-separated
// (two during a rotation); empty is allowed (none). The value is never repeated in a message.
func (s *Set) WebhookSecrets(p *string, name, env, usage string) {
	s.parse(name, env, "", usage, "whsec", func(v string) error {
		if v != "" {
			for _, secret := range strings.Split(v, ",") {
				if _, err := stdwebhook.ParseSecret(strings.TrimSpace(secret)); err != nil {
					return err
				}
			}
		}
		*p = v
		return nil
	})
}

// List binds a comma-separated list of words, each one of choices; empty is none.
func (s *Set) List(p *[]string, name, env, usage string, choices ...string) {
	s.parse(name, env, "", usage+" ("+strings.Join(choices, ",")+")", "list", func(v string) error {
		var out []string
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			if !slices.Contains(choices, f) {
				return fmt.Errorf("%q is not one of %s", f, strings.Join(choices, ", "))
			}
			out = append(out, f)
		}
		*p = out
		return nil
	})
}

// Float binds a number within [min, max].
func (s *Set) Float(p *float64, name, env, def, usage string, min, max float64) {
	s.parse(name, env, def, usage, "float", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < min || f > max {
			return fmt.Errorf("%q is not a number between %g and %g", v, min, max)
		}
		*p = f
		return nil
	})
}

// CIDRs binds a comma-separated list of IP networks (or single addresses); empty is none.
func (s *Set) CIDRs(p *[]string, name, env, usage string) {
	s.parse(name, env, "", usage, "cidrs", func(v string) error {
		var out []string
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if _, _, err := net.ParseCIDR(f); err != nil && net.ParseIP(f) == nil {
				return fmt.Errorf("%q is not an IP network or address", f)
			}
			out = append(out, f)
		}
		*p = out
		return nil
	})
}

// Parse reads the flags of a stand-alone set (NewSet) and then checks the whole set (Check).
// It returns flag.ErrHelp when help was asked for.
func (s *Set) Parse(args []string) error {
	// pflag prints a bad flag's error and the whole usage; the caller reports the returned
	// error as one line instead, so that output is kept only when help was asked for.
	out := s.fs.Output()
	var buf bytes.Buffer
	s.fs.SetOutput(&buf)
	err := s.fs.Parse(args)
	s.fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			_, _ = out.Write(buf.Bytes())
			return flag.ErrHelp
		}
		return err
	}
	return s.Check()
}

// Check reports every bad value at once, in one line each: the flags were parsed already
// (by Parse, or by the cobra command the set is bound to), so what is left are bad
// environment values (or defaults) that no flag replaced.
func (s *Set) Check() error {
	var errs []error
	for _, v := range s.vars {
		if err := s.errs[v.flag]; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		for _, check := range s.checks {
			if err := check(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Args are the arguments left after the flags.
func (s *Set) Args() []string { return s.fs.Args() }

// Settings lists the set's settings as flag name and environment variable, in the order
// they were registered.
func (s *Set) Settings() [][2]string {
	out := make([][2]string, len(s.vars))
	for i, v := range s.vars {
		out[i] = [2]string{v.flag, v.env}
	}
	return out
}
