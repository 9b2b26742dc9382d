// Package pgtext says which strings Postgres can store as text: valid UTF-8 without the
// NUL character. Neither its text nor its jsonb type holds NUL, and both refuse bytes that
// are not UTF-8, even as a search term, so such input must be refused or cleaned before it
// reaches a query.
package pgtext

import (
	"strings"
	"unicode/utf8"
)

// Valid reports whether Postgres can store s as text.
func Valid(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// Clean makes text a client chose freely, such as a User-Agent header (HTTP allows bytes
// that are not UTF-8 there), storable: invalid bytes and NUL become U+FFFD, and the result
// is cut to at most max bytes on a character boundary.
func Clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
