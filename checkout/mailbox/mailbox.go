// Package mailbox holds the checks of what tekrar puts into mail on a client's word: the
// address (Check: a receipt's customer e-mail, an ordinary mailbox, local@domain, and
// nothing a mail server could route elsewhere) and the text (PlainText: an item's name, a
// refund's reason, one line of printable text). net/mail alone takes address literals (a@[10.0.0.1]), a
// bare host (a@localhost), quoted local parts and the old % and ! routing, each of which
// lets an API client aim tekrar's mail server at a host of its choosing. It is its own
// package, on the standard library only, because the doors (checkout and checkout/catalog,
// refusing them) and the sender (checkout/receipts, refusing a stored address) import
// neither each other.
package mailbox

import (
	"errors"
	"net/mail"
	"strings"
)

// Limits of an address (RFC 5321 4.5.3.1: a path of 256 octets with its angle brackets, a
// local part of 64).
const (
	MaxLength = 254
	MaxLocal  = 64
	maxLabel  = 63
)

// ErrInvalid is the error of every refused address (errors.Is); the *Invalid that carries it
// says what is wrong, for the refused field's message.
var ErrInvalid = errors.New("not an ordinary mailbox address")

// Invalid is a refused address: Reason says why, in words for the client that sent it.
type Invalid struct{ Reason string }

func (e *Invalid) Error() string        { return ErrInvalid.Error() + ": " + e.Reason }
func (e *Invalid) Is(target error) bool { return target == ErrInvalid }

func invalid(why string) error { return &Invalid{Reason: why} }

// Check accepts one bare address local@domain: net/mail parses it to itself (no display
// name, angle brackets or comment); the local part is a dot-atom of ASCII without % or !
// (no quoted part, no source routing), at most 64 octets; the domain is two or more DNS
// labels whose last has a letter (so no IP address, no address literal, no single-label host
// such as localhost) and is not localhost or under it, compared without regard to case;
// the whole at most 254 octets.
func Check(addr string) error {
	if addr == "" || len(addr) > MaxLength {
		return invalid("must be 1 to 254 characters")
	}
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Name != "" || a.Address != addr {
		return invalid("must be one bare address, local@domain, without a name, angle brackets or comments")
	}
	at := strings.LastIndexByte(addr, '@')
	local, domain := addr[:at], strings.ToLower(addr[at+1:])
	if len(local) > MaxLocal {
		return invalid("the part before @ must be at most 64 characters")
	}
	if !dotAtom(local) {
		return invalid("the part before @ must be letters, digits, dots and -_+=.'#$&*/?^`{|}~, without quotes, % or !")
	}
	if strings.HasPrefix(domain, "[") {
		return invalid("the domain must be a name, not an address literal")
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return invalid("the domain must be a name with a dot, such as example.com")
	}
	for _, l := range labels {
		if !dnsLabel(l) {
			return invalid("the domain must be DNS labels of letters, digits and hyphens")
		}
	}
	if !strings.ContainsFunc(labels[len(labels)-1], func(r rune) bool { return r >= 'a' && r <= 'z' }) {
		return invalid("the domain must be a name, not an IP address")
	}
	if labels[len(labels)-1] == "localhost" {
		return invalid("the domain must not be localhost")
	}
	return nil
}

// dotAtom: RFC 5322's dot-atom of ASCII atext, less % and ! (routing through the domain to
// another host, which some servers still honour).
func dotAtom(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			case strings.IndexByte("#$&'*+-/=?^_`{|}~", c) >= 0:
			default:
				return false
			}
		}
	}
	return true
}

// dnsLabel: 1 to 63 letters, digits and hyphens, not beginning or ending with a hyphen
// (lower case here: the domain is lowered first).
func dnsLabel(l string) bool {
	if l == "" || len(l) > maxLabel || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
