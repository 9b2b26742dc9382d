package client

import (
	"testing"

	"github.com/tekrar/tekrar/internal/problem"
)

// TestEveryCodeHasASentinel keeps the client's codes in step with the server's one table:
// a code tekrar can answer that a caller cannot name with errors.Is fails here.
func TestEveryCodeHasASentinel(t *testing.T) {
	for _, s := range problem.Codes {
		if _, ok := sentinels[Code(s.Code)]; !ok {
			t.Errorf("no sentinel for %s: add Code and Err for it in errors.go", s.Code)
		}
	}
	for c := range sentinels {
		if _, ok := problem.Lookup(problem.Code(c)); !ok {
			t.Errorf("sentinel for %s, which tekrar never answers", c)
		}
	}
}
