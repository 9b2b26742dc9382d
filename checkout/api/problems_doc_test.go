package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/checkout"
)

// moduleRoot is where go.mod is, from this package's directory.
const moduleRoot = "../.."

// raisedProblemCodes finds every problem code the server can raise: the code argument of
// each problem.New call in the module's non-test sources. A code that is not a string
// literal fails the test, so that no code escapes the scan. The payment provider service
// (checkout/psp) is another API with its own codes, listed in its package documentation.
func raisedProblemCodes(t *testing.T) map[string]string {
	t.Helper()
	codes := map[string]string{} // code → where it is raised
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(moduleRoot, path); rel == filepath.Join("checkout", "psp") || strings.HasPrefix(d.Name(), ".") && path != moduleRoot {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_templ.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 3 {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr: // problem.New from another package
				if x, ok := fn.X.(*ast.Ident); !ok || x.Name != "problem" || fn.Sel.Name != "New" {
					return true
				}
			case *ast.Ident: // New inside package problem
				if fn.Name != "New" || f.Name.Name != "problem" {
					return true
				}
			default:
				return true
			}
			if sel, ok := call.Args[1].(*ast.SelectorExpr); ok && sel.Sel.Name == "Code" {
				return true // a copy of a problem that was raised elsewhere
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: problem code is not a string literal; write it as one so that this test sees it", fset.Position(call.Pos()))
				return true
			}
			code, _ := strconv.Unquote(lit.Value)
			codes[code] = fset.Position(call.Pos()).String()
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return codes
}

// documentedProblemCodes reads the codes in the first column of docs/problems.md's table.
func documentedProblemCodes(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "problems.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([a-z_]+)`")
	codes := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			codes[m[1]] = true
		}
	}
	return codes
}

// TestProblemCodesAreDocumented keeps docs/problems.md, the codes the server raises and the
// advice given with them in step, in both directions: a client must be able to look up
// every code it can receive, and a documented code must be one it can receive.
func TestProblemCodesAreDocumented(t *testing.T) {
	raised := raisedProblemCodes(t)
	documented := documentedProblemCodes(t)
	if len(raised) < 20 || len(documented) < 20 {
		t.Fatalf("found %d raised and %d documented codes: the scan is broken", len(raised), len(documented))
	}
	for _, code := range slices.Sorted(func(yield func(string) bool) {
		for c := range raised {
			if !yield(c) {
				return
			}
		}
	}) {
		if !documented[code] {
			t.Errorf("%s is raised (%s) but not in docs/problems.md", code, raised[code])
		}
	}
	for code := range documented {
		if _, ok := raised[code]; !ok {
			t.Errorf("%s is in docs/problems.md but nothing raises it", code)
		}
	}
	for _, code := range checkout.AdvisedCodes() {
		if _, ok := raised[code]; !ok {
			t.Errorf("checkout's advice table has %s, which nothing raises", code)
		}
	}
}
