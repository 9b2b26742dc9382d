package report

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeSQL is a statement that changes rows: none belongs in this package.
var writeSQL = regexp.MustCompile(`(?i)\b(insert\s+into|update\s+\w+(\s+\w+)?\s+set|delete\s+from|truncate|merge\s+into)\b`)

// TestReportOnlyReads keeps the rule of docs/console.md ("report reads, checkout writes"):
// this package's code runs no statement that writes and opens no transaction. Its functions
// take a sqlx.QueryerContext, which cannot Exec; this also catches a write sent through a
// query (INSERT ... RETURNING) or a type assertion to a wider interface.
func TestReportOnlyReads(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		n++
		ast.Inspect(f, func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.BasicLit:
				if x.Kind == token.STRING && writeSQL.MatchString(x.Value) {
					t.Errorf("%s: a statement that writes: %s", fset.Position(x.Pos()), writeSQL.FindString(x.Value))
				}
			case *ast.SelectorExpr:
				if s := x.Sel.Name; strings.Contains(s, "Exec") || strings.HasPrefix(s, "Begin") {
					t.Errorf("%s: %s: report reads only; writes are package checkout's", fset.Position(x.Pos()), s)
				}
			}
			return true
		})
	}
	if n == 0 {
		t.Fatal("no source found")
	}
}
