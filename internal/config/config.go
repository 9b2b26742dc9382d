// Package config is tekrar's one configuration loader. Every setting has an environment
// variable (TEKRAR_..., plus DATABASE_URL) and a matching flag; a flag wins over the
// environment, which wins over the default. Everything is parsed and checked before the
// process does any work, so a bad value fails at start with a message naming the setting,
// never at the first request.
package config

import (
	"bytes"
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
)

// Set is a group of settings bound to one command's flags.
type Set struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   map[string]error // per flag name; a valid flag clears a bad environment value
	vars   []setting
}

type setting struct {
	flag, env, def, usage string
}

// NewSet starts a set for the named command. getenv is os.Getenv outside tests.
func NewSet(command string, getenv func(string) string, output io.Writer) *Set {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(output)
	s := &Set{fs: fs, getenv: getenv, errs: make(map[string]error)}
	fs.Usage = func() { s.usage(command) }
	return s
}

func (s *Set) usage(command string) {
	w := s.fs.Output()
	fmt.Fprintf(w, "usage: tekrar %s [flags]\n\nEvery flag can also be set by its environment variable; a flag wins.\n\n", command)
	for _, v := range s.vars {
		def := v.def
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(w, "  --%-22s %s\n  %-24s env %s, default %s\n", v.flag, v.usage, "", v.env, def)
	}
}

// parse registers one setting whose text is turned into a value by conv.
func (s *Set) parse(name, env, def, usage string, conv func(string) error) {
	s.register(name, env, def, usage, conv, s.fs.Func)
}

// register is parse with the flag kind chosen: Func takes a value, BoolFunc may stand alone.
func (s *Set) register(name, env, def, usage string, conv func(string) error, define func(string, string, func(string) error)) {
	s.vars = append(s.vars, setting{name, env, def, usage})
	initial := def
	source := "default"
	if v := s.getenv(env); v != "" {
		initial, source = v, env
	}
	if err := conv(initial); err != nil {
		s.errs[name] = fmt.Errorf("%s: %w", sourceName(source, env, name), err)
	}
	define(name, usage, func(v string) error {
		if err := conv(v); err != nil {
			return err
		}
		delete(s.errs, name)
		return nil
	})
}

func sourceName(source, env, name string) string {
	if source == "default" {
		return "--" + name + " default"
	}
	return env
}

// String binds a text setting.
func (s *Set) String(p *string, name, env, def, usage string) {
	s.parse(name, env, def, usage, func(v string) error { *p = v; return nil })
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

// Duration binds a duration setting that must lie within [min, max].
func (s *Set) Duration(p *time.Duration, name, env, def, usage string, min, max time.Duration) {
	s.parse(name, env, def, usage, func(v string) error {
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		if d < min || d > max {
			return fmt.Errorf("%s is out of range [%s, %s]", d, min, max)
		}
		*p = d
		return nil
	})
}

// Int binds an integer setting that must lie within [min, max].
func (s *Set) Int(p *int, name, env, def, usage string, min, max int) {
	s.parse(name, env, def, usage, func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if n < min || n > max {
			return fmt.Errorf("%d is out of range [%d, %d]", n, min, max)
		}
		*p = n
		return nil
	})
}

// Bool binds a true/false setting; the flag alone (--demo) means true.
func (s *Set) Bool(p *bool, name, env, def, usage string) {
	s.register(name, env, def, usage, func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
		return nil
	}, s.fs.BoolFunc)
}

// Choice binds a setting that must be one of the given words.
func (s *Set) Choice(p *string, name, env, def, usage string, choices ...string) {
	s.parse(name, env, def, usage+" ("+strings.Join(choices, "|")+")", func(v string) error {
		for _, c := range choices {
			if v == c {
				*p = v
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(choices, ", "))
	})
}

// Level binds a log level.
func (s *Set) Level(p *slog.Level, name, env, def, usage string) {
	s.parse(name, env, def, usage+" (debug|info|warn|error)", func(v string) error {
		return p.UnmarshalText([]byte(v))
	})
}

// DatabaseURL binds a Postgres connection string; empty is allowed here and checked by the
// command that needs it.
func (s *Set) DatabaseURL(p *string, usage string) {
	s.parse("database-url", "DATABASE_URL", "", usage, func(v string) error {
		if err := CheckDatabaseURL(v); err != nil {
			return err
		}
		*p = v
		return nil
	})
}

// URL binds an http(s) URL; empty is allowed.
func (s *Set) URL(p *string, name, env, usage string) {
	s.parse(name, env, "", usage, func(v string) error {
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

// List binds a comma-separated list of words, each one of choices; empty is none.
func (s *Set) List(p *[]string, name, env, usage string, choices ...string) {
	s.parse(name, env, "", usage+" ("+strings.Join(choices, ",")+")", func(v string) error {
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
	s.parse(name, env, def, usage, func(v string) error {
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
	s.parse(name, env, "", usage, func(v string) error {
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

// Parse reads the flags and reports every bad value at once. It returns flag.ErrHelp when
// help was asked for.
func (s *Set) Parse(args []string) error {
	// The flag package prints a bad flag's error and then the whole usage; the caller
	// reports the returned error as one line instead, so that output is kept only when
	// help was asked for.
	out := s.fs.Output()
	var buf bytes.Buffer
	s.fs.SetOutput(&buf)
	err := s.fs.Parse(args)
	s.fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = out.Write(buf.Bytes())
		}
		return err
	}
	var errs []error
	for _, v := range s.vars {
		if err := s.errs[v.flag]; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Args are the arguments left after the flags.
func (s *Set) Args() []string { return s.fs.Args() }
