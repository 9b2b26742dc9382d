package checkout

import (
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorted keys", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"nested and whitespace", "{ \"z\" : [ {\"y\":1, \"x\":2} ],\n\"a\":null }", `{"a":null,"z":[{"x":2,"y":1}]}`},
		{"numbers keep their text", `{"n":1.0,"m":10e2}`, `{"m":10e2,"n":1.0}`},
		{"escapes are normalised", `{"s":"\u00e9\/<"}`, `{"s":"é/<"}`},
		{"last duplicate wins", `{"a":1,"a":2}`, `{"a":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"a":1} {"b":2}`, `{"a":1}x`} {
		if _, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q): want an error", bad)
		}
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(method, path, body string) [32]byte {
		t.Helper()
		f, err := Fingerprint(method, path, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := fp("POST", "/v1/orders", `{"amount":9000,"currency":"TRY"}`)
	if got := fp("POST", "/v1/orders", " {\"currency\": \"TRY\", \"amount\": 9000}\n"); got != base {
		t.Error("reordered keys and whitespace changed the fingerprint")
	}
	for name, other := range map[string][32]byte{
		"amount": fp("POST", "/v1/orders", `{"amount":9001,"currency":"TRY"}`),
		"path":   fp("POST", "/v1/orders/1/refunds", `{"amount":9000,"currency":"TRY"}`),
		"method": fp("PUT", "/v1/orders", `{"amount":9000,"currency":"TRY"}`),
	} {
		if other == base {
			t.Errorf("a different %s gave the same fingerprint", name)
		}
	}
}
