// Package stdwebhook signs and verifies webhooks in the Standard Webhooks format
// (https://www.standardwebhooks.com): a message id, a Unix timestamp and the raw body, signed
// with HMAC-SHA256 under a shared secret, in three headers:
//
//	webhook-id:        msg_2KWPBgLlAfxdpx2AI54pPJ85f4W
//	webhook-timestamp: 1674087231
//	webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=
//
// The signed content is "id.timestamp.body"; the secret is "whsec_" and the base64 of the
// key. A signature header may carry several space-separated signatures (during a secret's
// rotation both are sent); one valid v1 signature is enough.
//
// For merchants: this is the package to receive tekrar's webhooks with. Verify checks a
// delivery's signature and timestamp under your endpoint's secret (both secrets during a
// rotation), and Receive applies each event once in your own Postgres, by its webhook-id,
// however often tekrar delivers it (it delivers at least once, with the same webhook-id on
// every retry). docs/webhooks-out.md has a complete handler, the headers, the retry
// schedule and every event's payload. It depends on nothing but the standard library.
//
// tekrar uses it both ways: to check what its payment provider sends (the provider inbox)
// and to sign what it sends merchants (checkout/deliveries).
package stdwebhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The header names, as the specification spells them (HTTP header names are not case
// sensitive).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret's text form.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a timestamp may be from the receiver's clock: it bounds how
// long a captured message can be replayed.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify. Each means the message must be refused; none says more than that to a
// sender, on purpose.
var (
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp   = errors.New("webhook: webhook-timestamp is not a Unix time in seconds")
	ErrTooOld         = errors.New("webhook: timestamp too old")
	ErrTooNew         = errors.New("webhook: timestamp too far in the future")
	ErrNoSignature    = errors.New("webhook: no signature matches")
)

// Key is a signing key.
type Key []byte

// NewSecret returns a fresh random secret in its text form (whsec_ and 32 random bytes in
// base64).
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's RNG does not fail
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSecret reads a secret's text form; the "whsec_" prefix is optional.
func ParseSecret(secret string) (Key, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("webhook: secret is not whsec_ and base64: %w", err)
	}
	if len(k) < 16 {
		return nil, errors.New("webhook: secret is shorter than 16 bytes")
	}
	return Key(k), nil
}

// Sign returns the v1 signature of one message: "v1," and the base64 HMAC-SHA256 of
// "id.timestamp.body".
func (k Key) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(k.mac(id, ts.Unix(), body))
}

func (k Key) mac(id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(unix, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Headers returns the three headers of a message signed with every key in keys (two during
// a rotation).
func Headers(id string, ts time.Time, body []byte, keys ...Key) http.Header {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = k.Sign(id, ts, body)
	}
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return h
}

// Verifier checks messages against one or more keys (during a rotation, the old and the new).
type Verifier struct {
	Keys []Key
	// Tolerance bounds the distance between the message's timestamp and Now; zero means
	// DefaultTolerance.
	Tolerance time.Duration
	// Now is the receiver's clock; nil means time.Now.
	Now func() time.Time
}

// Message is what Verify vouches for.
type Message struct {
	ID        string
	Timestamp time.Time
}

// Verify checks a message's headers and raw body: the timestamp within the tolerance, and a
// v1 signature by one of the keys, compared in constant time. The body must be the bytes as
// received: re-encoded JSON does not verify.
func (v Verifier) Verify(h http.Header, body []byte) (Message, error) {
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return Message{}, ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return Message{}, ErrBadTimestamp
	}
	ts := time.Unix(unix, 0)
	now, tol := time.Now, v.Tolerance
	if v.Now != nil {
		now = v.Now
	}
	if tol == 0 {
		tol = DefaultTolerance
	}
	switch d := now().Sub(ts); {
	case d > tol:
		return Message{}, ErrTooOld
	case d < -tol:
		return Message{}, ErrTooNew
	}
	for _, k := range v.Keys {
		want := k.mac(id, unix, body)
		for _, s := range strings.Fields(sigs) {
			version, b64, ok := strings.Cut(s, ",")
			if !ok || version != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				continue
			}
			if hmac.Equal(got, want) {
				return Message{ID: id, Timestamp: ts}, nil
			}
		}
	}
	return Message{}, ErrNoSignature
}
