package api

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestIdempotencyKey(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		want    string
		wantErr error
	}{
		{"bare", []string{"order-123"}, "order-123", nil},
		{"uuid", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"sf-string", []string{`"order-123"`}, "order-123", nil},
		{"sf-string escapes", []string{`"a\"b\\c"`}, `a"b\c`, nil},
		{"longest", []string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), nil},
		{"missing", nil, "", errKeyMissing},
		{"twice", []string{"a", "b"}, "", errKeyInvalid},
		{"twice the same", []string{"a", "a"}, "", errKeyInvalid},
		{"empty", []string{""}, "", errKeyInvalid},
		{"empty quoted", []string{`""`}, "", errKeyInvalid},
		{"too long", []string{strings.Repeat("k", 256)}, "", errKeyInvalid},
		{"space inside", []string{"a b"}, "", errKeyInvalid},
		{"non-ascii", []string{"sipariş"}, "", errKeyInvalid},
		{"control", []string{"a\x01b"}, "", errKeyInvalid},
		{"unterminated quote", []string{`"abc`}, "", errKeyInvalid},
		{"bad escape", []string{`"a\nb"`}, "", errKeyInvalid},
		{"inner quote", []string{`"a"b"`}, "", errKeyInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add("Idempotency-Key", v)
			}
			got, err := idempotencyKey(h)
			if err != tt.wantErr || got != tt.want {
				t.Fatalf("idempotencyKey(%q) = %q, %v; want %q, %v", tt.values, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPreferWait(t *testing.T) {
	tests := []struct {
		prefer []string
		want   time.Duration
	}{
		{nil, 0},
		{[]string{"wait=5"}, 5 * time.Second},
		{[]string{"respond-async, wait=3"}, 3 * time.Second},
		{[]string{"return=minimal", "Wait = 2"}, 2 * time.Second},
		{[]string{"wait=abc"}, 0},
		{[]string{"wait=-1"}, 0},
		{[]string{"wait"}, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.prefer {
			h.Add("Prefer", v)
		}
		if got := preferWait(h); got != tt.want {
			t.Errorf("preferWait(%q) = %v, want %v", tt.prefer, got, tt.want)
		}
	}
}
