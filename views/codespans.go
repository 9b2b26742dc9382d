package views

import "strings"

// span is a piece of a table text: plain, or a `code` span.
type span struct {
	Text string
	Code bool
}

// codeSpans splits text at its backticks, the only markup the table of problem codes uses,
// so a page shows code spans as code and escapes everything as text.
func codeSpans(text string) []span {
	parts := strings.Split(text, "`")
	out := make([]span, 0, len(parts))
	for i, p := range parts {
		if p != "" {
			out = append(out, span{Text: p, Code: i%2 == 1})
		}
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
