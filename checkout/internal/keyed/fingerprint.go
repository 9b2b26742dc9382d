package keyed

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Fingerprint identifies a request's intent: SHA-256 over the method, the path and the
// canonical form of the JSON body. Two requests that differ only in JSON key order or
// insignificant whitespace have the same fingerprint; any other difference (an amount, a
// card token, another endpoint) gives another.
func Fingerprint(method, path string, body []byte) ([32]byte, error) {
	return fingerprintBound(method, path, body, nil)
}

// fingerprintBound is Fingerprint of a request whose body names something by reference (an
// order's cart_id): bound, what it names as it was when the request arrived, is hashed
// after a NUL (which canonical JSON never holds) in its own canonical form. A nil bound
// gives Fingerprint's sum, so a request without one keeps the fingerprint it always had.
func fingerprintBound(method, path string, body, bound []byte) ([32]byte, error) {
	canon, err := CanonicalJSON(body)
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	h.Write([]byte(method + "\n" + path + "\n"))
	h.Write(canon)
	if bound != nil {
		b, err := CanonicalJSON(bound)
		if err != nil {
			return [32]byte{}, fmt.Errorf("bound: %w", err)
		}
		h.Write([]byte{0})
		h.Write(b)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}

// CanonicalJSON re-encodes a JSON document with object keys sorted and no insignificant
// whitespace. Numbers keep their text (1.0 and 1 stay different) and strings are re-escaped
// one way.
//
// It refuses two documents whose canonical form would hide a difference a decoder sees: an
// object that names a member twice (ErrDuplicateMember; a decoder that keeps the first, or
// merges nested objects as encoding/json does into a struct, reads another request than
// the last-wins canonical form says) and text that is not UTF-8 (ErrInvalidUTF8; decoding
// turns it into U+FFFD, so it would share a fingerprint with a body that sent U+FFFD).
//
// For any other document the output is byte for byte what encoding/json gives for the
// document decoded into an interface{} (with UseNumber) and encoded again without HTML
// escaping; stored fingerprints depend on it, and a fuzz test holds the two to it. It is written by hand because it runs
// on every keyed request, replays included, and decoding into maps cost several times more.
func CanonicalJSON(body []byte) ([]byte, error) {
	c := canonicalizer{in: body, out: make([]byte, 0, len(body))}
	c.space()
	if err := c.value(0); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	c.space()
	if c.pos < len(c.in) {
		return nil, errors.New("canonical json: data after the document")
	}
	return c.out, nil
}

// Errors that CanonicalJSON wraps for documents that are valid JSON syntax but cannot be
// given one meaning.
var (
	ErrDuplicateMember = errors.New("an object names a member twice")
	ErrInvalidUTF8     = errors.New("text is not valid UTF-8")
)

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

type canonicalizer struct {
	in  []byte
	pos int
	out []byte
}

func (c *canonicalizer) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: "+format, append([]any{c.pos}, args...)...)
}

func (c *canonicalizer) space() { c.pos = skipSpace(c.in, c.pos) }

// skipSpace returns the index of the first byte at or after i that is not JSON's
// insignificant whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func (c *canonicalizer) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.errorf("unexpected end of JSON input")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		_, err := c.str(true)
		return err
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.errorf("invalid character %q looking for beginning of value", b)
	}
}

func (c *canonicalizer) literal(lit string) error {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
		return c.errorf("invalid literal")
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

// number copies a number's text after checking it against JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *canonicalizer) number() error {
	start := c.pos
	in := c.in
	i := c.pos
	if i < len(in) && in[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case digits() == 0:
		c.pos = i
		return c.errorf("invalid number")
	}
	if i < len(in) && in[i] == '.' {
		i++
		if digits() == 0 {
			c.pos = i
			return c.errorf("invalid number")
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if digits() == 0 {
			c.pos = i
			return c.errorf("invalid number")
		}
	}
	c.pos = i
	c.out = append(c.out, in[start:i]...)
	return nil
}

// str reads a string and, if emit, writes its canonical form. It returns the decoded
// value, which object keys are sorted by.
func (c *canonicalizer) str(emit bool) ([]byte, error) {
	start := c.pos
	plain := true // printable ASCII without escapes: its canonical form is its text
	i := start + 1
	for ; i < len(c.in); i++ {
		b := c.in[i]
		if b == '"' {
			break
		}
		switch {
		case b < 0x20:
			c.pos = i
			return nil, c.errorf("invalid character %q in string literal", b)
		case b == '\\':
			plain = false
			i++ // the escaped byte cannot end the string
		case b >= 0x80 || b == 0x7f:
			plain = false
		}
	}
	if i >= len(c.in) {
		c.pos = i
		return nil, c.errorf("unexpected end of JSON input")
	}
	c.pos = i + 1
	raw := c.in[start:c.pos]
	if plain {
		if emit {
			c.out = append(c.out, raw...)
		}
		return raw[1 : len(raw)-1], nil
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("offset %d: %w", start, ErrInvalidUTF8)
	}
	// Escapes and non-ASCII text are rare: let encoding/json decode and re-encode them, so
	// that its rules (surrogates, U+2028) apply unchanged.
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, c.errorf("%v", err)
	}
	if emit {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			return nil, c.errorf("%v", err)
		}
		c.out = append(c.out, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
	}
	return []byte(s), nil
}

// member is one name/value pair of an object, its canonical text at out[start:end].
type member struct {
	name       []byte
	start, end int
}

func (c *canonicalizer) object(depth int) error {
	if depth > maxDepth {
		return c.errorf("exceeded max depth")
	}
	c.pos++ // {
	base := len(c.out)
	c.out = append(c.out, '{')
	var stack [16]member // most objects: no allocation
	members := stack[:0]
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	for {
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.errorf("looking for beginning of object key string")
		}
		start := len(c.out)
		name, err := c.str(true)
		if err != nil {
			return err
		}
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.errorf("after object key")
		}
		c.pos++
		c.out = append(c.out, ':')
		c.space()
		if err := c.value(depth); err != nil {
			return err
		}
		members = append(members, member{name: name, start: start, end: len(c.out)})
		c.space()
		if c.pos >= len(c.in) {
			return c.errorf("unexpected end of JSON input")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
			c.space()
			continue
		case '}':
			c.pos++
		default:
			return c.errorf("after object key:value pair")
		}
		break
	}
	sorted := true
	for i := 1; i < len(members); i++ {
		if bytes.Compare(members[i-1].name, members[i].name) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		c.out = append(c.out, '}')
		return nil
	}
	// Reorder by name; equal neighbours are a repeated member.
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i-1].name, members[i].name) {
			return fmt.Errorf("member %q: %w", members[i].name, ErrDuplicateMember)
		}
	}
	text := slices.Clone(c.out[base+1:])
	c.out = c.out[:base+1]
	for _, m := range members {
		if len(c.out) > base+1 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, text[m.start-base-1:m.end-base-1]...)
	}
	c.out = append(c.out, '}')
	return nil
}

func (c *canonicalizer) array(depth int) error {
	if depth > maxDepth {
		return c.errorf("exceeded max depth")
	}
	c.pos++ // [
	c.out = append(c.out, '[')
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		if err := c.value(depth); err != nil {
			return err
		}
		c.space()
		if c.pos >= len(c.in) {
			return c.errorf("unexpected end of JSON input")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
			c.space()
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.errorf("after array element")
		}
	}
}
