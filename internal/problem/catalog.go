package problem

import "net/http"

// The problems that the HTTP plumbing itself can raise. Domain packages define their own
// next to the code that raises them; docs/problems.md lists them all.
var (
	// NotFound is a route that does not exist.
	NotFound = func() *Problem { return New(http.StatusNotFound, "not_found", "Not found") }
	// MethodNotAllowed is a route that exists with another method.
	MethodNotAllowed = func() *Problem {
		return New(http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed")
	}
	// Unauthorized is a missing, malformed or unknown client secret.
	Unauthorized = func() *Problem {
		return New(http.StatusUnauthorized, "unauthorized", "Missing or invalid credentials").
			WithDetail("send the client secret as 'Authorization: Bearer <secret>'")
	}
	// Internal is a bug: the details are in the log under the request id, never in the
	// response.
	Internal = func() *Problem {
		return New(http.StatusInternalServerError, "internal_error", "Internal server error")
	}
)
