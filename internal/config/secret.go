package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Secret is a setting that must never be shown: printed, formatted or logged, it is masked
// (its prefix and stars); Reveal is its value, for the one place that uses it.
type Secret string

// masked keeps the prefix that says what kind of secret it is ("sk_test_").
func (s Secret) masked() string {
	if s == "" {
		return ""
	}
	prefix := string(s)
	if i := strings.LastIndex(prefix, "_"); i >= 0 && i < 8 {
		prefix = prefix[:i+1]
	} else {
		prefix = ""
	}
	return prefix + "****"
}

func (s Secret) String() string               { return s.masked() }
func (s Secret) GoString() string             { return fmt.Sprintf("config.Secret(%q)", s.masked()) }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(s.masked()) }
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.masked()), nil }

// Reveal is the secret's value.
func (s Secret) Reveal() string { return string(s) }

// Secret binds a secret whose value starts with one of prefixes; empty is allowed (unset).
// The value is never repeated in a message.
func (s *Set) Secret(p *Secret, name, env, usage string, prefixes ...string) {
	s.parse(name, env, "", usage, "secret", func(v string) error {
		if v != "" && !hasAnyPrefix(v, prefixes) {
			return fmt.Errorf("not a secret of the expected kind (%s…)", strings.Join(prefixes, "…, "))
		}
		if strings.ContainsAny(v, " \t\r\n") {
			return errors.New("a secret holds no spaces")
		}
		*p = Secret(v)
		return nil
	})
}

func hasAnyPrefix(v string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}
