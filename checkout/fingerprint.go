package checkout

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
)

// Fingerprint identifies a request's intent: SHA-256 over the method, the path and the
// canonical form of the JSON body. Two requests that differ only in JSON key order or
// insignificant whitespace have the same fingerprint; any other difference (an amount, a
// card token, another endpoint) gives another.
func Fingerprint(method, path string, body []byte) ([32]byte, error) {
	canon, err := CanonicalJSON(body)
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", method, path)
	h.Write(canon)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}

// CanonicalJSON re-encodes a JSON document with object keys sorted and no insignificant
// whitespace. Numbers keep their text (1.0 and 1 stay different), strings are re-escaped
// one way, and for a repeated object key the last value wins, as it does when the body is
// decoded.
func CanonicalJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return nil, errors.New("canonical json: data after the document")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// encoding/json writes map keys sorted, which is all canonicalisation needs.
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
