package catalog

import (
	"slices"
	"strconv"

	"github.com/tekrar/tekrar/internal/problem"
)

// Precondition is what a conditional PUT or DELETE of a product or a cart asks of the
// version it replaces (RFC 9110, 13.1): the entity tags of If-Match and If-None-Match as
// sent, each list split at its commas. Empty lists ask nothing: the write is
// unconditional, last one wins.
type Precondition struct {
	IfMatch     []string // "*": any current version; else one of these tags
	IfNoneMatch []string // "*": create only; else none of these tags
}

// ETag is the strong entity tag of a product's or a cart's version: every change bumps the
// version, and a write that changes nothing keeps it, so the same body sent twice has one
// tag.
func ETag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// holds reports whether the precondition holds for the current state: exists, and if so
// its version. Tags are compared strongly: a weak tag (W/"3") never matches.
func (p Precondition) holds(exists bool, version int64) bool {
	tag := ETag(version)
	if len(p.IfMatch) > 0 {
		if !exists || !(slices.Contains(p.IfMatch, "*") || slices.Contains(p.IfMatch, tag)) {
			return false
		}
	}
	if len(p.IfNoneMatch) > 0 && exists {
		if slices.Contains(p.IfNoneMatch, "*") || slices.Contains(p.IfNoneMatch, tag) {
			return false
		}
	}
	return true
}

// errStale is a precondition that does not hold: 412, nothing changed.
func errStale(what string, exists bool, version int64) *problem.Problem {
	p := problem.Of(problem.CodePreconditionFailed)
	if !exists {
		return p.WithDetail("the " + what + " does not exist; nothing was changed")
	}
	return p.WithDetail("the "+what+" is at another version (its current ETag is "+ETag(version)+"); read it again and resend; nothing was changed").
		With("etag", ETag(version))
}
