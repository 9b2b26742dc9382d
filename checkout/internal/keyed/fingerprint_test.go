package keyed

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorted keys", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"nested and whitespace", "{ \"z\" : [ {\"y\":1, \"x\":2} ],\n\"a\":null }", `{"a":null,"z":[{"x":2,"y":1}]}`},
		{"numbers keep their text", `{"n":1.0,"m":10e2}`, `{"m":10e2,"n":1.0}`},
		{"escapes are normalised", `{"s":"\u00e9\/<"}`, `{"s":"é/<"}`},
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
	// Valid syntax that a decoder could read as another request than the canonical form.
	for _, tt := range []struct {
		in   string
		want error
	}{
		{`{"a":1,"a":2}`, ErrDuplicateMember},
		{`{"a":{"x":1},"a":{}}`, ErrDuplicateMember}, // encoding/json merges these into a struct
		{`{"b":1,"a":[{"x":1,"y":2,"x":3}]}`, ErrDuplicateMember},
		{`{"a\u0062":1,"ab":2}`, ErrDuplicateMember}, // equal once unescaped
		{"{\"a\":\"\xff\"}", ErrInvalidUTF8},         // would read as U+FFFD
		{"{\"\xc3\":1}", ErrInvalidUTF8},
	} {
		if _, err := CanonicalJSON([]byte(tt.in)); !errors.Is(err, tt.want) {
			t.Errorf("CanonicalJSON(%q) = %v, want %v", tt.in, err, tt.want)
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

// referenceCanonicalJSON is the definition CanonicalJSON must match byte for byte: the
// document decoded by encoding/json (numbers as text) and encoded again, map keys sorted;
// refused when it is not UTF-8 or an object repeats a member.
func referenceCanonicalJSON(body []byte) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, ErrInvalidUTF8
	}
	if err := referenceDuplicates(body); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if len(bytes.Trim(body[dec.InputOffset():], " \t\r\n")) > 0 { // JSON's whitespace only
		return nil, errors.New("data after the document")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// referenceDuplicates walks the document's tokens with encoding/json and reports a member
// named twice in one object. A syntax error is left to the decoder.
func referenceDuplicates(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		names  map[string]bool
		name   bool // the next token in this object is a member name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return nil
			}
			continue
		}
		if top != nil && top.object {
			if top.name {
				name := tok.(string)
				if top.names[name] {
					return ErrDuplicateMember
				}
				top.names[name] = true
				top.name = false
				continue
			}
			top.name = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, names: map[string]bool{}, name: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		default:
			if len(stack) == 0 {
				return nil
			}
		}
	}
}

// canonicalSeeds are documents whose corners the two implementations must agree on.
var canonicalSeeds = []string{
	`{"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":2,"unit_amount":4500}],"amount":9000,"payment":{"card_token":"tok_visa"},"customer":{"id":"cus_42","email":"ayse@example.com"},"metadata":{"device_id":"d"}}`,
	`{"b":1,"a":2,"b":3}`, `{"a":{"x":1},"a":{"y":2}}`, `{"":1,"\u0000":2," ":3}`, `{"a\u0062":1,"ab":2}`,
	`{"é":1,"e":2,"z":3}`, `"\ud800"`, `"\udc00\ud800x"`, `"\u2028\u2029"`, "\"\xff\xfe\"", "\"a\x7fb\"",
	`"\b\f\n\r\t\"\\\/"`, `"<&>"`, `[1,-0,0.5,1e10,1E+2,-1.5e-3,12345678901234567890123]`,
	`[]`, `{}`, `[[],{},[{}]]`, ` {"a" : [ 1 , 2 ] } `, `true`, `false`, `null`, `0`,
	`01`, `-`, `1.`, `1e`, `.5`, `+1`, `[1,]`, `{"a":1,}`, `{"a"}`, `{a:1}`, `[`, `"abc`, "\"a\nb\"",
	`nul`, `tru`, `{"a":1}}`, `[1]x`, "\xef\xbb\xbf{}", `"\x"`, `"\u12"`, `{"a":1 "b":2}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := referenceCanonicalJSON(body)
		got, err := CanonicalJSON(body)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("CanonicalJSON(%q): error %v, encoding/json: %v", body, err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("CanonicalJSON(%q) = %q, encoding/json gives %q", body, got, want)
		}
	})
}

// BenchmarkCanonicalJSON compares CanonicalJSON with encoding/json's round trip on an
// order body, in the same run:
//
//	go test -run '^$' -bench CanonicalJSON ./checkout/
func BenchmarkCanonicalJSON(b *testing.B) {
	body := []byte(canonicalSeeds[0])
	for _, impl := range []struct {
		name string
		fn   func([]byte) ([]byte, error)
	}{{"encoding_json", referenceCanonicalJSON}, {"canonicalizer", CanonicalJSON}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := impl.fn(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
