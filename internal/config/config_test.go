package config

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestLoadServerDefaults(t *testing.T) {
	c, err := LoadServer("serve", nil, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":8080" || c.LogFormat != "json" || c.ShutdownTimeout != 15*time.Second || c.Lease != 30*time.Second ||
		c.MaxBodyBytes != 65536 || !c.AutoMigrate || c.DatabaseURL != "" || c.DoubleTapWindow != 2*time.Minute {
		t.Fatalf("defaults: %+v", c)
	}
	d, err := LoadServer("dev", nil, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d.Addr != "127.0.0.1:8080" || d.LogFormat != "text" || d.DevPGPort != 54329 || d.DevDir == "" {
		t.Fatalf("dev defaults: %+v", d)
	}
}

func TestLoadServerPrecedence(t *testing.T) {
	c, err := LoadServer("serve", []string{"--lease=45s"},
		env("TEKRAR_LEASE", "40s", "TEKRAR_ADDR", ":9000", "DATABASE_URL", "postgres://u@h/db"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lease != 45*time.Second || c.Addr != ":9000" || c.DatabaseURL != "postgres://u@h/db" {
		t.Fatalf("flag over env over default: %+v", c)
	}
	// A valid flag mends a bad environment value.
	if _, err := LoadServer("serve", []string{"--lease=45s"}, env("TEKRAR_LEASE", "soon"), io.Discard); err != nil {
		t.Fatalf("flag did not override a bad env value: %v", err)
	}
}

func TestLoadServerRejectsBadValues(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want string // the setting the one-line message must name
	}{
		{"duration", nil, []string{"TEKRAR_SHUTDOWN_TIMEOUT", "abc"}, "TEKRAR_SHUTDOWN_TIMEOUT"},
		{"duration out of range", nil, []string{"TEKRAR_LEASE", "5ms"}, "TEKRAR_LEASE"},
		{"double-tap window too long", nil, []string{"TEKRAR_DOUBLE_TAP_WINDOW", "25h"}, "TEKRAR_DOUBLE_TAP_WINDOW"},
		{"double-tap window too short", nil, []string{"TEKRAR_DOUBLE_TAP_WINDOW", "500ms"}, "TEKRAR_DOUBLE_TAP_WINDOW"},
		{"choice", nil, []string{"TEKRAR_LOG_FORMAT", "xml"}, "TEKRAR_LOG_FORMAT"},
		{"level", nil, []string{"TEKRAR_LOG_LEVEL", "loud"}, "TEKRAR_LOG_LEVEL"},
		{"int", nil, []string{"TEKRAR_DB_MAX_CONNS", "many"}, "TEKRAR_DB_MAX_CONNS"},
		{"int range", nil, []string{"TEKRAR_DB_MAX_CONNS", "0"}, "TEKRAR_DB_MAX_CONNS"},
		{"bool", nil, []string{"TEKRAR_AUTO_MIGRATE", "perhaps"}, "TEKRAR_AUTO_MIGRATE"},
		{"database url", nil, []string{"DATABASE_URL", "mysql://x"}, "DATABASE_URL"},
		{"read database url", nil, []string{"TEKRAR_READ_DATABASE_URL", "mysql://x"}, "TEKRAR_READ_DATABASE_URL"},
		{"psp url", nil, []string{"TEKRAR_PSP_URL", "ftp://x"}, "TEKRAR_PSP_URL"},
		{"flag", []string{"--max-body-bytes=1"}, nil, "max-body-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadServer("serve", tt.args, env(tt.env...), io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming %s", msg, tt.want)
			}
		})
	}
	// The database URL is never echoed: it may carry a password.
	_, err := LoadServer("serve", nil, env("DATABASE_URL", "mysql://user:hunter2@x"), io.Discard)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v leaks the URL", err)
	}
}

func TestHelpListsEverySetting(t *testing.T) {
	var out strings.Builder
	_, err := LoadServer("serve", []string{"--help"}, env(), &out)
	if err != flag.ErrHelp {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"DATABASE_URL", "TEKRAR_ADDR", "TEKRAR_LOG_FORMAT", "TEKRAR_LEASE", "TEKRAR_PSP_URL", "TEKRAR_MAX_BODY_BYTES"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
}

func TestBoolFlagStandsAlone(t *testing.T) {
	c, err := LoadServer("dev", []string{"--demo"}, env(), io.Discard)
	if err != nil || !c.Demo {
		t.Fatalf("--demo alone: %v %v", c.Demo, err)
	}
	c, err = LoadServer("dev", []string{"--demo=false"}, env("TEKRAR_DEMO", "true"), io.Discard)
	if err != nil || c.Demo {
		t.Fatalf("--demo=false over the environment: %v %v", c.Demo, err)
	}
}

func TestParseDurationDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"d", "xd", "3d5", "soon"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

// TestWrongValueSaysWhatIsAccepted: slog's "unknown name" and a range in 2160h0m0s made the
// user look up what tekrar wanted. The message lists the valid words, and gives a duration's
// range in the unit the value was written in.
func TestWrongValueSaysWhatIsAccepted(t *testing.T) {
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--log-level=loud"}, nil, `"loud" is not one of debug, info, warn, error`},
		{nil, []string{"TEKRAR_LOG_LEVEL", "loud"}, `TEKRAR_LOG_LEVEL: "loud" is not one of debug, info, warn, error`},
		{[]string{"--lease=2h"}, nil, `"2h" is out of range: from 1s to 1h`},
		{[]string{"--lease=90m"}, nil, `"90m" is out of range: from 1s to 60m (from 1s to 1h)`},
		{[]string{"--lease=5ms"}, nil, `"5ms" is out of range: from 1000ms to 3600000ms (from 1s to 1h)`},
		{[]string{"--event-retention=3651d"}, nil, `"3651d" is out of range: from 1h to 3650d`},
		{[]string{"--max-wait=2m"}, nil, `"2m" is out of range: from 0m to 1m`},
		{nil, []string{"TEKRAR_DOUBLE_TAP_WINDOW", "1d12h"}, `"1d12h" is out of range: from 1s to 1d`},
	}
	for _, tt := range tests {
		_, err := LoadServer("serve", tt.args, env(tt.env...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v %v: error %v, want %q", tt.args, tt.env, err, tt.want)
		}
	}
	for _, ok := range []string{"debug", "INFO", "warn", "error"} {
		if _, err := LoadServer("serve", []string{"--log-level", ok}, env(), io.Discard); err != nil {
			t.Errorf("--log-level %s: %v", ok, err)
		}
	}
}

// TestFlagsAfterArguments: the standard flag package stopped at the first argument.
func TestFlagsAfterArguments(t *testing.T) {
	var role string
	s := NewSet("operators create", env(), io.Discard)
	s.Choice(&role, "role", "TEKRAR_OPERATOR_ROLE", "viewer", "role", "viewer", "admin")
	if err := s.Parse([]string{"ops@example.com", "--role", "admin"}); err != nil {
		t.Fatal(err)
	}
	if role != "admin" || len(s.Args()) != 1 || s.Args()[0] != "ops@example.com" {
		t.Fatalf("role %q, args %q", role, s.Args())
	}
}

func TestSMTPURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SMTPServer
		bad  bool
	}{
		{in: "", want: SMTPServer{}},
		{in: "smtp://mail.example", want: SMTPServer{Host: "mail.example", Port: 587}},
		{in: "smtp://u%40x:p%3Ass@mail.example:2525", want: SMTPServer{Host: "mail.example", Port: 2525, Username: "u@x", Password: "p:ss"}},
		{in: "smtps://u:secretpw@[::1]", want: SMTPServer{Host: "::1", Port: 465, ImplicitTLS: true, Username: "u", Password: "secretpw"}},
		{in: "http://u:secretpw@mail.example", bad: true},
		{in: "smtp://u:secretpw@mail.example:0", bad: true},
		{in: "smtp://u:secretpw@mail.example/x", bad: true},
		{in: "smtp://u:secret%0D%0Apw@mail.example", bad: true},
		{in: "smtp://:25", bad: true},
	} {
		c, err := LoadServer("serve", nil, env("TEKRAR_SMTP_URL", tc.in), io.Discard)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted", tc.in)
			} else if strings.Contains(err.Error(), "secret") {
				t.Errorf("%q: the error shows the password: %v", tc.in, err)
			}
			continue
		}
		if err != nil || c.SMTP != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v", tc.in, c.SMTP, err, tc.want)
		}
		if strings.Contains(c.SMTP.String(), "secret") {
			t.Errorf("%q: String shows the password: %s", tc.in, c.SMTP)
		}
	}
	for _, from := range []string{"receipts@shop.example", "Shop <receipts@shop.example>"} {
		if _, err := LoadServer("serve", nil, env("TEKRAR_SMTP_FROM", from), io.Discard); err != nil {
			t.Errorf("from %q: %v", from, err)
		}
	}
	for _, from := range []string{"nobody", "a@b.example, c@d.example", "Shop <r@shop.example>\r\nBcc: x@evil.example"} {
		if _, err := LoadServer("serve", nil, env("TEKRAR_SMTP_FROM", from), io.Discard); err == nil {
			t.Errorf("from %q accepted", from)
		}
	}
}

// TestReceiptBounds: TEKRAR_RECEIPTS_PER_MINUTE and TEKRAR_RECEIPTS_PER_DAY default to 600
// and 10,000 (receipts.PerMinuteDefault and PerDayDefault, which TestSettingsAreTheDefaults
// in checkout/receipts holds to these), are read, and refuse 0 or less: a bound of nothing
// would refuse every receipt, which is not a setting but an outage.
func TestReceiptBounds(t *testing.T) {
	c, err := LoadServer("serve", nil, env(), io.Discard)
	if err != nil || c.ReceiptsPerMinute != 600 || c.ReceiptsPerDay != 10_000 {
		t.Fatalf("defaults %d, %d (%v)", c.ReceiptsPerMinute, c.ReceiptsPerDay, err)
	}
	c, err = LoadServer("serve", nil, env("TEKRAR_RECEIPTS_PER_MINUTE", "5", "TEKRAR_RECEIPTS_PER_DAY", "50"), io.Discard)
	if err != nil || c.ReceiptsPerMinute != 5 || c.ReceiptsPerDay != 50 {
		t.Fatalf("set: %d, %d (%v)", c.ReceiptsPerMinute, c.ReceiptsPerDay, err)
	}
	for _, name := range []string{"TEKRAR_RECEIPTS_PER_MINUTE", "TEKRAR_RECEIPTS_PER_DAY"} {
		for _, v := range []string{"0", "-1", "lots"} {
			if _, err := LoadServer("serve", nil, env(name, v), io.Discard); err == nil {
				t.Errorf("%s=%s accepted", name, v)
			}
		}
	}
}
