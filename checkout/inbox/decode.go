package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/tekrar/tekrar/checkout/psp"
	"github.com/tekrar/tekrar/internal/pgtext"
)

// Dead-letter reasons: why a validly signed delivery could not be stored as a provider event
// (provider_dead_letters.reason).
const (
	DeadNotAnEvent     = "not_an_event"     // not JSON, or without an id and a type
	DeadNotText        = "not_text"         // bytes that are not UTF-8, or a NUL character
	DeadOutOfRange     = "out_of_range"     // a sequence outside 1 … 2^31-1
	DeadRefusedByStore = "refused_by_store" // the database refused it as data while applying it
)

// UnstorableEventError is a signed delivery tekrar can never store as it is: redelivering it
// changes nothing, so it is kept as a dead letter rather than answered 5xx. Detail says what
// was refused, never the body's content.
type UnstorableEventError struct {
	Reason string // one of the Dead* reasons
	Detail string
}

func (e *UnstorableEventError) Error() string { return e.Reason + ": " + e.Detail }

func unstorable(reason, format string, args ...any) error {
	return &UnstorableEventError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Decode reads a verified body. Members tekrar does not know are allowed: a
// provider adds fields without notice. A body tekrar cannot store (see the Dead* reasons)
// is an *UnstorableEventError; the event is returned as far as it was read all the same, so
// that the caller can check its id against the signed one.
//
// The body is stored as jsonb, which holds neither a NUL character nor bytes that are not
// UTF-8 in any member, read by tekrar or not; and encoding/json would silently turn bytes
// that are not UTF-8 into U+FFFD, so they are looked for before it reads them.
func Decode(body []byte) (psp.Event, error) {
	if !utf8.Valid(body) {
		return psp.Event{}, unstorable(DeadNotText, "the body is not UTF-8 (at byte %d)", invalidUTF8At(body))
	}
	var pe psp.Event
	if err := json.Unmarshal(body, &pe); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "data.sequence" {
			return pe, unstorable(DeadOutOfRange, "data.sequence is not an integer from 1 to %d", math.MaxInt32)
		}
		return pe, unstorable(DeadNotAnEvent, "the body is not a provider event: %s", jsonErrorKind(err))
	}
	if pe.ID == "" || len(pe.ID) > 255 || pe.Type == "" || len(pe.Type) > 100 {
		return pe, unstorable(DeadNotAnEvent, "an event needs an id (1 to 255 characters) and a type (1 to 100)")
	}
	if path := nulIn(body); path != "" {
		return pe, unstorable(DeadNotText, "%s holds a NUL character", path)
	}
	if d := pe.Data; d.ChargeID != "" && (d.Sequence <= 0 || d.Sequence > math.MaxInt32) {
		return pe, unstorable(DeadOutOfRange, "a charge's event needs a sequence from 1 to %d", math.MaxInt32)
	}
	return pe, nil
}

// invalidUTF8At is the offset of the first byte of b that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// jsonErrorKind says what is wrong with a JSON document without quoting it.
func jsonErrorKind(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%s is not a %s", te.Field, te.Type)
	}
	return "not valid JSON"
}

// nulIn names the first member (or member name) of the JSON document body whose text holds
// a NUL character, or is empty when none does. body is valid JSON.
func nulIn(body []byte) string {
	if !bytes.Contains(body, []byte(`\u0000`)) {
		return ""
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return ""
	}
	return nulPath(v, "")
}

func nulPath(v any, path string) string {
	switch v := v.(type) {
	case string:
		if !pgtext.Valid(v) {
			return orBody(path)
		}
	case []any:
		for i, x := range v {
			if p := nulPath(x, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case map[string]any:
		for k, x := range v {
			name := strings.TrimPrefix(path+"."+k, ".")
			if !pgtext.Valid(k) {
				return "a member name"
			}
			if p := nulPath(x, name); p != "" {
				return p
			}
		}
	}
	return ""
}

func orBody(s string) string {
	if s == "" {
		return "the body"
	}
	return s
}
