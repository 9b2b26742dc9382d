package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/internal/problem"
)

// readJSON reads a JSON request body of at most max bytes, or returns the problem that
// says why it cannot: 415 for another media type, 413 for too large, 400 for no JSON.
func readJSON(r *http.Request, max int64) ([]byte, *problem.Problem) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, problem.Of(problem.CodeUnsupportedMediaType).
			WithDetail("send the body as Content-Type: application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, max))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, problem.Of(problem.CodeBodyTooLarge).
			WithDetail(fmt.Sprintf("the body may be at most %d bytes", max))
	case err != nil:
		return nil, problem.Of(problem.CodeMalformedJSON).WithTitle("Request body could not be read")
	}
	// Validity is checked by decodeStrict: json.Decoder scans the whole document before it
	// decodes, so a syntax error is reported as such, never as a field error.
	return body, nil
}

// decodeStrict decodes a valid JSON body into v. A field of the wrong type or a field the
// API does not know is a validation error naming the field: a misspelt "amout" must not be
// silently ignored in a payment.
//
// What it accepts is exactly what the body's fingerprint says, so that a stored response
// is only ever replayed to a request that means the same: member names must be the
// field's own, byte for byte (encoding/json would also take "AMOUNT" or "ſku" for them,
// while the fingerprint tells them apart), and no object may name a member twice (the
// fingerprint keeps the last, encoding/json merges nested objects). A property test holds
// the two together.
func decodeStrict(body []byte, v any) *problem.Problem {
	// JSON is UTF-8 (RFC 8259); encoding/json would quietly turn invalid bytes into U+FFFD
	// and store a name or a reason the client never sent.
	if !utf8.Valid(body) {
		return problem.Of(problem.CodeMalformedJSON).
			WithDetail("the body is not valid UTF-8")
	}
	// The canonical form is what the fingerprint hashes; its refusals are the decoder's.
	_, canonErr := checkout.CanonicalJSON(body)
	if errors.Is(canonErr, checkout.ErrDuplicateMember) {
		return problem.Of(problem.CodeMalformedJSON).
			WithDetail("an object names the same member twice; send each member once")
	}
	if canonErr == nil {
		var doc any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&doc); err == nil {
			if field, ok := unknownMember(doc, reflect.TypeOf(v), ""); ok {
				return checkout.ValidationFailed([]checkout.FieldError{{Field: field, Message: "is not a known field (names are case-sensitive)"}})
			}
			if missing := missingMembers(doc, reflect.TypeOf(v), "", nil); len(missing) > 0 {
				return checkout.ValidationFailed(missing)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One document, then only JSON's own whitespace: a second document or stray bytes
		// would make the body mean two things, and the fingerprint refuses it too.
		if len(bytes.Trim(body[dec.InputOffset():], " \t\r\n")) > 0 {
			return problem.Of(problem.CodeMalformedJSON).
				WithDetail("send exactly one JSON document")
		}
		if canonErr != nil { // never seen: whatever the fingerprint refuses, the decoder does too
			return problem.Of(problem.CodeMalformedJSON)
		}
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		return checkout.ValidationFailed([]checkout.FieldError{{Field: field, Message: "must be a " + jsonKind(typeErr.Type.Kind().String())}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return checkout.ValidationFailed([]checkout.FieldError{{Field: name, Message: "is not a known field"}})
	default:
		return problem.Of(problem.CodeMalformedJSON).WithDetail(whereJSONStopped(err, body))
	}
}

// whereJSONStopped says where a body stopped parsing as JSON and what JSON expected there:
// by byte offset (from 1) and kind, never quoting the body, which may hold a card token.
func whereJSONStopped(err error, body []byte) string {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty: send a JSON document"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("the body ends at byte %d, inside the JSON document: it was cut short", len(body))
	case errors.As(err, &se):
		return fmt.Sprintf("an unexpected character at byte %d, where JSON expected %s", se.Offset, jsonExpected(se.Error()))
	}
	return "the body is not valid JSON"
}

// jsonExpected turns the context of encoding/json's syntax error ("invalid character 'x'
// looking for beginning of value") into what JSON expected, leaving out the character.
func jsonExpected(msg string) string {
	ctx := msg
	if rest, ok := strings.CutPrefix(msg, "invalid character "); ok && len(rest) > 1 {
		if i := strings.Index(rest[1:], "' "); i >= 0 {
			ctx = rest[i+3:]
		}
	}
	switch {
	case ctx == "looking for beginning of object key string":
		return "the beginning of a member name (a string)"
	case ctx == "looking for beginning of value":
		return "the beginning of a value"
	case ctx == "after object key":
		return "a colon after the member name"
	case ctx == "after object key:value pair":
		return "a comma or the end of the object"
	case ctx == "after array element":
		return "a comma or the end of the list"
	case ctx == "after top-level value":
		return "the end of the document"
	case ctx == "in string literal":
		return "no control character inside a string"
	case ctx == "in string escape code", strings.HasPrefix(ctx, "in \\u"):
		return "a valid escape inside a string"
	case ctx == "in numeric literal":
		return "a number"
	case strings.HasPrefix(ctx, "in literal "):
		lit, _, _ := strings.Cut(strings.TrimPrefix(ctx, "in literal "), " ")
		return "the literal " + lit
	}
	return "valid JSON"
}

// unknownMember walks a decoded document alongside the Go type it is to be decoded into
// and returns the path of the first object member (in name order) that is not exactly the
// JSON name of a field. Values of another shape than the type are left to the decoder,
// which reports them as type errors.
func unknownMember(doc any, t reflect.Type, path string) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := doc.(type) {
	case map[string]any:
		names := slices.Sorted(maps.Keys(v))
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for _, name := range names {
				ft, ok := fields[name]
				if !ok {
					return joinPath(path, name), true
				}
				if p, bad := unknownMember(v[name], ft, joinPath(path, name)); bad {
					return p, true
				}
			}
		case reflect.Map:
			for _, name := range names {
				if p, bad := unknownMember(v[name], t.Elem(), joinPath(path, name)); bad {
					return p, true
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range v {
				if p, bad := unknownMember(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); bad {
					return p, true
				}
			}
		}
	}
	return "", false
}

// missingMembers walks a decoded document alongside the Go type it is to be decoded into
// and lists, in field order, the members that the type tags tekrar:"required" and the
// document leaves out or sends as null. encoding/json would decode either as the zero
// value, and for a price, a stock level, an amount or a quantity zero is a value of its own:
// a PUT without its price must not set the price to 0. Values of another shape than the
// type are left to the decoder.
func missingMembers(doc any, t reflect.Type, path string, out []checkout.FieldError) []checkout.FieldError {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := doc.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			for f := range t.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" || name == "-" {
					continue
				}
				m, present := v[name]
				if (!present || m == nil) && f.Tag.Get("tekrar") == "required" {
					out = append(out, checkout.FieldError{Field: joinPath(path, name), Message: "is required"})
					continue
				}
				out = missingMembers(m, f.Type, joinPath(path, name), out)
			}
		case reflect.Map:
			for _, name := range slices.Sorted(maps.Keys(v)) {
				out = missingMembers(v[name], t.Elem(), joinPath(path, name), out)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range v {
				out = missingMembers(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
	}
	return out
}

// jsonFields maps the JSON names of a struct's fields, as encoding/json names them, to
// their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for name, t := range jsonFields(ft) {
					if _, shadowed := out[name]; !shadowed {
						out[name] = t
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32", "uint", "uint64":
		return "whole number"
	case "string":
		return "string"
	case "slice", "array":
		return "list"
	case "struct", "map", "ptr":
		return "object"
	case "bool":
		return "boolean"
	}
	return goKind
}
