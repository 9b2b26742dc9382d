package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var (
	errKeyMissing = errors.New("missing")
	errKeyInvalid = errors.New("invalid")
)

// MaxKeyLength is the longest Idempotency-Key accepted.
const MaxKeyLength = 255

// idempotencyKey reads the Idempotency-Key header: 1 to 255 visible ASCII characters, bare
// or as an RFC 8941 string ("..." with \" and \\ escapes). Sent twice is invalid: two keys
// cannot name one intent.
func idempotencyKey(h http.Header) (string, error) {
	vals := h.Values("Idempotency-Key")
	switch {
	case len(vals) == 0:
		return "", errKeyMissing
	case len(vals) > 1:
		return "", errKeyInvalid
	}
	v := strings.TrimSpace(vals[0])
	if strings.HasPrefix(v, `"`) {
		var ok bool
		if v, ok = unquoteSFString(v); !ok {
			return "", errKeyInvalid
		}
	}
	if len(v) == 0 || len(v) > MaxKeyLength {
		return "", errKeyInvalid
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return "", errKeyInvalid
		}
	}
	return v, nil
}

// unquoteSFString decodes an RFC 8941 sf-string.
func unquoteSFString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i >= len(s)-1 || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		case c == '"':
			return "", false
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// preferWait reads RFC 7240 "Prefer: wait=N" (seconds); 0 when absent or malformed, since
// a preference the server does not understand is ignored, not refused.
func preferWait(h http.Header) time.Duration {
	for _, line := range h.Values("Prefer") {
		for _, pref := range strings.Split(line, ",") {
			tok, _, _ := strings.Cut(pref, ";")
			name, val, ok := strings.Cut(strings.TrimSpace(tok), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n < 0 {
				continue
			}
			return time.Duration(min(n, 3600)) * time.Second
		}
	}
	return 0
}
