package problem

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestCodesRowsNamed: each row of the table names its fields, so that a reader sees which
// boolean is Retryable and which SafeNewKey (and a row cannot shift them by one).
func TestCodesRowsNamed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Names[0].Name != "Codes" {
			return true
		}
		for _, el := range vs.Values[0].(*ast.CompositeLit).Elts {
			rows++
			for _, v := range el.(*ast.CompositeLit).Elts {
				if _, ok := v.(*ast.KeyValueExpr); !ok {
					t.Errorf("row %d of Codes has an unnamed field", rows)
					break
				}
			}
		}
		return false
	})
	if rows != len(Codes) {
		t.Fatalf("read %d rows of Codes in codes.go, want %d", rows, len(Codes))
	}
}
