package keyed

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Spec says what one keyed route's fingerprint covers, so that a reader sees in
// one place when a retry is the same request (docs/fingerprints.md lists the doors' specs,
// and checkout's TestFingerprintSpecsMatchTheDocs holds the two together).
//
// The default is the safe one: every member of the canonical body is covered, and so is a
// member added to the API later, unless a spec names it. Two requests that differ in a
// covered member are two requests (a reused key: 422), never a replay of each other.
//
// Every key stores the exact fingerprint (Fingerprint: the whole body, card token text
// included), which alone decides a replay on the hot path. A spec that names a card token
// or excludes members adds a scope fingerprint, consulted only when the exact one differs
// (see Engine.Execute).
type Spec struct {
	// Method and Route are the API's route of the operation (Route with its parameters in
	// braces), part of the scope fingerprint's hash input; the API fills them (On).
	Method, Route string
	// Version is part of the scope fingerprint's hash input. Change it whenever what the
	// route covers changes: keys stored under the old version then recognise only their
	// exact fingerprint (a refusal, never a wrong replay) until they expire.
	Version int
	// CardToken is the path of the member that holds a single-use card token. It is
	// covered by the identity of the card at the provider (Config.Card),
	// not by its text: a new token of the same card is the same purchase, a token of
	// another card is another. "" when the route takes no card.
	CardToken string
	// Excluded are members, by path, that a retry may change without becoming another
	// request; the first request's values stand. Every member not named is covered.
	Excluded []string
	// Bound says what the body names by reference that is covered with it, as it is when
	// the request arrives (Request.Bound); "" for none. Documentation: the binding itself
	// is the route's (BindCart).
	Bound string
}

// Paths are dotted member names through nested objects ("payment.card_token"); a path
// never goes through an array.

// On returns the spec as the operation of the route method route.
func (s Spec) On(method, route string) Spec {
	s.Method, s.Route = method, route
	return s
}

// Scoped reports whether the spec covers less than the exact body, or the card by identity:
// only then is there a scope fingerprint to store and compare.
func (s Spec) Scoped() bool { return s.CardToken != "" || len(s.Excluded) > 0 }

// Scope computes the scope fingerprint of a request on path (the concrete path, which names
// the order of a refund) with body and bound (Request.Bound, nil for none), and returns
// the card token it took out of the body ("" when there is none, or it is not a string).
//
// The body is decoded (numbers as text) and encoded again with the covered members only:
// encoding/json sorts object keys and, without HTML escaping, gives CanonicalJSON's form.
func (s Spec) Scope(path string, body, bound []byte) (sum [32]byte, cardToken string, err error) {
	canon, err := CanonicalJSON(body)
	if err != nil {
		return sum, "", err
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return sum, "", fmt.Errorf("scope: %w", err)
	}
	if s.CardToken != "" {
		if v, ok := removeMember(doc, s.CardToken).(string); ok {
			cardToken = v
		}
	}
	for _, p := range s.Excluded {
		removeMember(doc, p)
	}
	var covered bytes.Buffer
	enc := json.NewEncoder(&covered)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return sum, "", fmt.Errorf("scope: %w", err)
	}
	h := sha256.New()
	h.Write([]byte("tekrar scope v" + strconv.Itoa(s.Version) + "\n" + s.Method + " " + s.Route + "\n" + path + "\n"))
	h.Write(bytes.TrimSuffix(covered.Bytes(), []byte("\n")))
	if bound != nil {
		b, err := CanonicalJSON(bound)
		if err != nil {
			return sum, "", fmt.Errorf("bound: %w", err)
		}
		h.Write([]byte{0})
		h.Write(b)
	}
	h.Sum(sum[:0])
	return sum, cardToken, nil
}

// removeMember deletes the member at path from doc and returns its value (nil when there
// is none).
func removeMember(doc any, path string) any {
	names := strings.Split(path, ".")
	for _, n := range names[:len(names)-1] {
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = obj[n]
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	last := names[len(names)-1]
	v := obj[last]
	delete(obj, last)
	return v
}
