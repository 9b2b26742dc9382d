package client

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
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
