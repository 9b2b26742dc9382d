// Package problem writes RFC 9457 problem details, the one error format a tekrar client ever
// receives. Every problem carries a stable machine-readable code: clients branch on the code,
// never on the human-readable title or detail, which may change.
package problem

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

// ContentType is the media type of every error response.
const ContentType = "application/problem+json"

// Problem is one problem details object. Type is derived from Code, so the two cannot
// disagree; Instance is the request path unless set.
type Problem struct {
	Status   int
	Code     Code
	Title    string
	Detail   string
	Instance string
	// Extensions are extra members (retryable, order_id, errors...). They are written after
	// the standard members, in key order, so that a stored problem is byte-for-byte stable.
	Extensions map[string]any
}

// New returns a problem with the given status, stable code and title. Only a service with
// codes of its own (the fake payment provider) calls it: tekrar's problems come from the
// table, through Of.
func New(status int, code Code, title string) *Problem {
	return &Problem{Status: status, Code: code, Title: title}
}

// WithTitle replaces the table's title, for an occurrence that a more precise one serves.
func (p *Problem) WithTitle(title string) *Problem {
	p.Title = title
	return p
}

// WithDetail sets the human-readable explanation of this occurrence.
func (p *Problem) WithDetail(detail string) *Problem {
	p.Detail = detail
	return p
}

// With adds an extension member.
func (p *Problem) With(key string, value any) *Problem {
	if p.Extensions == nil {
		p.Extensions = make(map[string]any)
	}
	p.Extensions[key] = value
	return p
}

// Error lets a problem travel as an error through the domain.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return string(p.Code) + ": " + p.Detail
	}
	return string(p.Code) + ": " + p.Title
}

// PagesPath is where tekrar serves a page for each code of the table: PagesPath + code.
const PagesPath = "/problems/"

// TypeURI is the problem type for a code: for a code of the table, its page, a relative
// reference (RFC 9457 section 3.1.1) that resolves against the URL the client requested, so
// the link leads to the tekrar that answered under whatever host name the client used, and a
// stored answer replayed later stays right without tekrar knowing its public URL. A code of
// another service's (the payment provider's) has no page and keeps a URN. Clients branch on
// the code, not on the type: answers stored before the pages existed are replayed byte for
// byte with the URN they had, urn:tekrar:problem:<code>.
func TypeURI(code Code) string {
	if _, ok := specs[code]; ok {
		return PagesPath + string(code)
	}
	return "urn:tekrar:problem:" + string(code)
}

// MarshalJSON writes type, title, status, detail, instance and code, then the extensions.
func (p *Problem) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	member := func(k string, v any) error {
		enc, err := marshal(v)
		if err != nil {
			return err
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(enc)
		return nil
	}
	std := []struct {
		k    string
		v    any
		skip bool
	}{
		{"type", TypeURI(p.Code), false},
		{"title", p.Title, false},
		{"status", p.Status, false},
		{"detail", p.Detail, p.Detail == ""},
		{"instance", p.Instance, p.Instance == ""},
		{"code", p.Code, false},
	}
	for _, m := range std {
		if m.skip {
			continue
		}
		if err := member(m.k, m.v); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(p.Extensions))
	for k := range p.Extensions {
		switch k {
		case "type", "title", "status", "detail", "instance", "code":
			continue // the standard members cannot be overridden
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := member(k, p.Extensions[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal encodes without HTML escaping, so that "<" in a detail stays readable; the
// content type is JSON, never HTML, so browsers will not sniff it as markup.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Body renders the problem as it is sent, with Instance defaulting to path.
func (p *Problem) Body(path string) []byte {
	q := *p
	if q.Instance == "" {
		q.Instance = path
	}
	body, err := q.MarshalJSON()
	if err != nil {
		// Only an unencodable extension can get here: a programming error. Still answer
		// with a valid problem rather than nothing.
		fallback := New(q.Status, q.Code, q.Title)
		fallback.Instance = q.Instance
		body, _ = fallback.MarshalJSON()
	}
	return body
}

// Write sends the problem as the response, with the Retry-After its code has in the table.
func Write(w http.ResponseWriter, r *http.Request, p *Problem) {
	body := p.Body(r.URL.Path)
	h := w.Header()
	if ra := retryAfter(p.Code); ra != "" {
		h.Set("Retry-After", ra)
	}
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
