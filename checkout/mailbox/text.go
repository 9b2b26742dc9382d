package mailbox

import (
	"strings"
	"unicode"
)

// TextMessage is the message of a field refused by PlainText, for the client that sent it.
const TextMessage = "must be printable text on one line: no control characters (CR, LF, tab), line or paragraph separators, or bidirectional controls (it is printed on the customer's receipt)"

// PlainText reports whether s may be printed in a message tekrar sends on a client's word
// (an item's name, a refund's reason): one line of printable text. Control characters (CR
// and LF above all, which start a header or a line of their own), the Unicode line and
// paragraph separators, and the bidirectional controls (which reorder what a reader sees,
// so that a receipt's text can say what it does not hold) are refused. The length is the
// field's own limit, checked by its caller.
func PlainText(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Bidi_Control)
	})
}
