package keyed

import (
	"bytes"
	"encoding/json"
)

// DecodeHeaders reads a stored response's headers, a flat JSON object of strings as
// Postgres prints jsonb. Every replay decodes one, so the plain case (no escapes, which
// is every header tekrar stores) is read directly, at a fifth of encoding/json's cost;
// anything else goes to encoding/json, which is the reference (see the test).
func DecodeHeaders(b []byte) (map[string]string, error) {
	if h, ok := plainHeaders(b); ok {
		return h, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// plainHeaders parses {"k": "v", ...} with no backslashes, or reports ok false.
func plainHeaders(b []byte) (map[string]string, bool) {
	if bytes.IndexByte(b, '\\') >= 0 {
		return nil, false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	h := make(map[string]string, 4)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return h, skipSpace(b, i+1) == len(b)
	}
	for {
		k, j, ok := plainString(b, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		v, j, ok := plainString(b, skipSpace(b, i+1))
		if !ok {
			return nil, false
		}
		h[k] = v // a repeated name: the last wins, as in encoding/json
		i = skipSpace(b, j)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return h, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// plainString reads a JSON string starting at b[i] that holds only printable ASCII (so
// that it needs no decoding), returning it and the index after its closing quote.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c < 0x20 || c >= 0x7f:
			return "", 0, false
		}
	}
	return "", 0, false
}
