package sdk

import (
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestStandardLibraryOnly: a merchant's service imports this package; it must not pull in
// tekrar's server (gin, Postgres drivers, River) with it.
func TestStandardLibraryOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}

// TestDelay: the backoff doubles from BaseDelay up to MaxDelay, each wait in the upper half
// of its step, and a longer Retry-After wins.
func TestDelay(t *testing.T) {
	c := New("http://tekrar.invalid", "s", WithPolicy(Policy{MaxAttempts: 9, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}))
	for _, tc := range []struct {
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 0, 100 * time.Millisecond, 200 * time.Millisecond},
		{4, 0, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 0, 500 * time.Millisecond, time.Second}, // capped
		{60, 0, 500 * time.Millisecond, time.Second},
		{1, 2 * time.Second, 2 * time.Second, 2 * time.Second},
		{5, 100 * time.Millisecond, 500 * time.Millisecond, time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := c.delay(tc.attempt, tc.retryAfter)
			if d < tc.lo || d > tc.hi {
				t.Fatalf("attempt %d, Retry-After %v: %v, want %v to %v", tc.attempt, tc.retryAfter, d, tc.lo, tc.hi)
			}
			seen[d] = true
		}
		if tc.lo < tc.hi && len(seen) < 2 {
			t.Errorf("attempt %d: always %v: no jitter", tc.attempt, tc.lo)
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "2": 2 * time.Second, "0": 0, "-1": 0, "soon": 0} {
		if got := retryAfter(v); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
	if got := retryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 59*time.Minute || got > time.Hour {
		t.Errorf("Retry-After as a date an hour away: %v", got)
	}
}
