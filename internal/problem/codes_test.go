package problem

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/problems.md's table of codes from Codes")

// moduleRoot is where go.mod is, from this package's directory.
const moduleRoot = "../.."

const (
	docBegin = "<!-- codes: generated from problem.Codes (internal/problem/codes.go); `go test ./internal/problem -run TestProblemsDoc -update` rewrites it -->"
	docEnd   = "<!-- end of codes -->"
)

// docTable renders Codes as docs/problems.md shows them.
func docTable() string {
	yesNo := map[bool]string{true: "yes", false: "no"}
	var b strings.Builder
	b.WriteString("| code | status | retryable | safe_new_key | Retry-After | meaning |\n|---|---|---|---|---|---|\n")
	for _, s := range Codes {
		safe := yesNo[s.SafeNewKey]
		if s.PerOccurrence {
			safe = "see meaning"
		}
		ra := ""
		if s.RetryAfter > 0 {
			ra = strconv.Itoa(s.RetryAfter)
		}
		fmt.Fprintf(&b, "| `%s` | %d | %s | %s | %s | %s |\n", s.Code, s.Status, yesNo[s.Retryable], safe, ra, s.Doc)
	}
	return b.String()
}

// TestProblemsDoc keeps docs/problems.md's table of codes what Codes says, so that the
// documentation of a code (status, advice, Retry-After, meaning) cannot drift from what the
// server sends. With -update it rewrites the table.
func TestProblemsDoc(t *testing.T) {
	path := filepath.Join(moduleRoot, "docs", "problems.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(doc, []byte(docBegin)), bytes.Index(doc, []byte(docEnd))
	if begin < 0 || end < begin {
		t.Fatalf("docs/problems.md lacks the markers of the generated table:\n%s\n%s", docBegin, docEnd)
	}
	want := docBegin + "\n" + docTable() + docEnd
	got := string(doc[begin : end+len(docEnd)])
	if got == want {
		return
	}
	if *update {
		out := append(append(bytes.Clone(doc[:begin]), want...), doc[end+len(docEnd):]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/problems.md's table of codes is not problem.Codes; run go test ./internal/problem -run TestProblemsDoc -update\ngot:\n%s\nwant:\n%s", got, want)
}

// TestCodesTable checks the table itself: one row per code, a status that is an error, a
// title and a meaning for each.
func TestCodesTable(t *testing.T) {
	seen := map[Code]bool{}
	for _, s := range Codes {
		if seen[s.Code] {
			t.Errorf("%s has two rows", s.Code)
		}
		seen[s.Code] = true
		if s.Status < 400 || s.Status > 599 || s.Title == "" || s.Doc == "" {
			t.Errorf("%s: status %d, title %q, doc %q", s.Code, s.Status, s.Title, s.Doc)
		}
		if s.RetryAfter > 0 && !s.Retryable {
			t.Errorf("%s has a Retry-After but is not retryable", s.Code)
		}
	}
}

// TestEveryRaisedCodeIsInTheTable scans the module's sources (but the payment provider
// service, checkout/psp, another API with codes of its own, save its answer table): problem.New is not called (a
// problem's status and title come from the table, through Of), every code named is a
// constant of the table, and every code of the table is raised somewhere, so that a client
// can look up every code it can receive and every documented code is one it can receive.
func TestEveryRaisedCodeIsInTheTable(t *testing.T) {
	constants := map[string]Code{} // constant name → code
	for _, s := range Codes {
		constants[constName(t, s.Code)] = s.Code
	}
	raised := map[Code]string{} // code → where
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		psp := filepath.Join("checkout", "psp")
		if d.IsDir() {
			if strings.HasPrefix(rel, psp+string(filepath.Separator)) || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		// The provider's own codes are skipped; its answer table (answers.go) is the one file
		// of checkout/psp that names the codes tekrar answers its clients.
		if filepath.Dir(rel) == psp && d.Name() != "answers.go" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		inProblem := f.Name.Name == "problem"
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && inProblem && g.Tok != token.IMPORT {
				for _, spec := range g.Specs {
					if v, ok := spec.(*ast.ValueSpec); ok && g.Tok == token.CONST {
						if typ, ok := v.Type.(*ast.Ident); ok && typ.Name == "Code" {
							for _, n := range v.Names {
								if _, ok := constants[n.Name]; !ok {
									t.Errorf("%s: the code %s has no row in problem.Codes", fset.Position(n.Pos()), n.Name)
								}
							}
						}
					}
				}
				continue // the constants and the table themselves
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				var name string
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "problem" {
						name = n.Sel.Name
					}
				case *ast.Ident:
					if inProblem {
						name = n.Name
					}
				case *ast.CallExpr:
					if !inProblem && isProblemFunc(n.Fun, "New") {
						t.Errorf("%s: problem.New; raise a code of problem.Codes with problem.Of", fset.Position(n.Pos()))
					}
					if isProblemFunc(n.Fun, "Of") && len(n.Args) == 1 {
						if _, ok := n.Args[0].(*ast.BasicLit); ok {
							t.Errorf("%s: problem.Of with a literal; name the code's constant", fset.Position(n.Pos()))
						}
					}
				}
				if code, ok := constants[name]; ok {
					raised[code] = fset.Position(n.Pos()).String()
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(raised) < 20 {
		t.Fatalf("found %d raised codes: the scan is broken", len(raised))
	}
	for _, s := range Codes {
		if _, ok := raised[s.Code]; !ok {
			t.Errorf("%s is in problem.Codes (and documented) but nothing raises it", s.Code)
		}
	}
}

func isProblemFunc(fun ast.Expr, name string) bool {
	switch fn := fun.(type) {
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		return ok && x.Name == "problem" && fn.Sel.Name == name
	case *ast.Ident:
		return fn.Name == name
	}
	return false
}

// constName is the Go name of code's constant: Code, then the code in camel case, with
// the initialisms Go spells in capitals.
func constName(t *testing.T, code Code) string {
	t.Helper()
	name := "Code"
	for _, w := range strings.Split(string(code), "_") {
		switch w {
		case "json", "http":
			name += strings.ToUpper(w)
		default:
			name += strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return name
}

// TestWriteFollowsTheTable: Retry-After was set by a switch on code strings in the API, and
// by hand elsewhere, so one code (store_unavailable) went out with 1, 2 or no Retry-After
// depending on who raised it. Every problem written now carries its code's Retry-After, and
// a keyed request's advice is its code's.
func TestWriteFollowsTheTable(t *testing.T) {
	for _, s := range Codes {
		t.Run(string(s.Code), func(t *testing.T) {
			p := Of(s.Code)
			if p.Status != s.Status || p.Title != s.Title || p.Code != s.Code {
				t.Fatalf("Of: %+v, want %+v", p, s)
			}
			w := httptest.NewRecorder()
			Write(w, httptest.NewRequest("GET", "/x", nil), p.Advised())
			want := ""
			if s.RetryAfter > 0 {
				want = strconv.Itoa(s.RetryAfter)
			}
			if got := w.Header().Get("Retry-After"); got != want || w.Code != s.Status {
				t.Errorf("status %d Retry-After %q, want %d %q", w.Code, got, s.Status, want)
			}
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body["retryable"] != s.Retryable || !s.PerOccurrence && body["safe_new_key"] != s.SafeNewKey {
				t.Errorf("advice %v %v, want %v %v", body["retryable"], body["safe_new_key"], s.Retryable, s.SafeNewKey)
			}
		})
	}
	// What the raiser says of its occurrence stays; the advised problem is a copy.
	p := Of(CodeIdempotencyKeyExpired).With("retryable", false).With("safe_new_key", true)
	if q := p.Advised(); q.Extensions["safe_new_key"] != true {
		t.Errorf("Advised overrode the occurrence's safe_new_key: %v", q.Extensions)
	}
	shared := Of(CodeOrderNotFound)
	if shared.Advised(); len(shared.Extensions) != 0 {
		t.Errorf("Advised changed the problem it was given: %v", shared.Extensions)
	}
	// A code outside the table is a bug, answered as one rather than undocumented.
	if p := Of("no_such_code"); p.Code != CodeInternalError || p.Status != 500 {
		t.Errorf("Of an unknown code: %+v", p)
	}
	// Problems are errors that errors.Is matches by code.
	if !errors.Is(fmt.Errorf("wrapped: %w", Of(CodeOrderNotFound).WithDetail("x")), Of(CodeOrderNotFound)) ||
		errors.Is(Of(CodeOrderNotFound), Of(CodeRefundNotFound)) {
		t.Error("errors.Is does not match problems by code")
	}
}

// TestAdviceAgreesWithText: a row's text may not contradict its advice. A code whose text
// tells the client to go on with a new key says safe_new_key true (unless the occurrence
// decides);
// one that says to retry with the same key, or never a new one, is retryable; a Retry-After
// is only sent with a retryable code.
func TestAdviceAgreesWithText(t *testing.T) {
	for _, s := range Codes {
		doc := strings.ToLower(s.Doc)
		for _, say := range []string{"with a new key", "use a new key"} {
			if !s.PerOccurrence && strings.Contains(doc, say) && !s.SafeNewKey {
				t.Errorf("%s: its text says to go on %q, but safe_new_key is false", s.Code, say)
			}
		}
		if strings.Contains(doc, "retry with the same key") && !s.Retryable {
			t.Errorf("%s: its text says to retry with the same key, but it is not retryable", s.Code)
		}
		if s.RetryAfter > 0 && !s.Retryable {
			t.Errorf("%s: Retry-After %d on a code that is not retryable", s.Code, s.RetryAfter)
		}
	}
}
