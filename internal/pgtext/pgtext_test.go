package pgtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"":             true,
		"tekrar-ios/1": true,
		"çay ☕":        true,
		"a\x00b":       false,
		"caf\xe9":      false,
		"\xed\xa0\x80": false, // a UTF-16 surrogate encoded as UTF-8
	} {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestClean(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"tekrar-ios/1.2", 300, "tekrar-ios/1.2"},
		{"caf\xe9-app", 300, "caf\uFFFD-app"},
		{"a\x00b", 300, "a\uFFFDb"},
		{strings.Repeat("a", 299) + "é", 300, strings.Repeat("a", 299)}, // the cut falls inside é
		{"ééé", 5, "éé"},
		{"ééé", 1, ""},
	}
	for _, tt := range tests {
		got := Clean(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("Clean(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if !Valid(got) || len(got) > tt.max {
			t.Errorf("Clean(%q, %d) = %q: not storable or too long", tt.in, tt.max, got)
		}
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "abc", "caf\xe9", "a\x00b", "ééé", "\xff\xfe\xfd"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1000 {
			return
		}
		got := Clean(s, max)
		if !Valid(got) || len(got) > max || !utf8.ValidString(got) {
			t.Fatalf("Clean(%q, %d) = %q", s, max, got)
		}
	})
}
