package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
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
		return nil, problem.New(http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type").
			WithDetail("send the body as Content-Type: application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, max))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, problem.New(http.StatusRequestEntityTooLarge, "body_too_large", "Request body too large").
			WithDetail(fmt.Sprintf("the body may be at most %d bytes", max))
	case err != nil:
		return nil, problem.New(http.StatusBadRequest, "malformed_json", "Request body could not be read")
	}
	// Validity is checked by decodeStrict: json.Decoder scans the whole document before it
	// decodes, so a syntax error is reported as such, never as a field error.
	return body, nil
}

// decodeStrict decodes a valid JSON body into v. A field of the wrong type or a field the
// API does not know is a validation error naming the field: a misspelt "amout" must not be
// silently ignored in a payment.
func decodeStrict(body []byte, v any) *problem.Problem {
	// JSON is UTF-8 (RFC 8259); encoding/json would quietly turn invalid bytes into U+FFFD
	// and store a name or a reason the client never sent.
	if !utf8.Valid(body) {
		return problem.New(http.StatusBadRequest, "malformed_json", "Request body is not valid JSON").
			WithDetail("the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One document, then only JSON's own whitespace: a second document or stray bytes
		// would make the body mean two things, and the fingerprint refuses it too.
		if len(bytes.Trim(body[dec.InputOffset():], " \t\r\n")) > 0 {
			return problem.New(http.StatusBadRequest, "malformed_json", "Request body is not valid JSON").
				WithDetail("send exactly one JSON document")
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
		return problem.New(http.StatusBadRequest, "malformed_json", "Request body is not valid JSON")
	}
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
