package views

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestViewsNeverQuery keeps the console's components plain renderers of what a handler hands
// them (docs/console.md, "Adding a page"): they import the standard library and templ,
// never checkout, checkout/report or a database package, so a query cannot hide in a page.
func TestViewsNeverQuery(t *testing.T) {
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
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.SplitN(path, "/", 2)[0], ".")
			if (std && path != "database/sql" && !strings.HasPrefix(path, "database/sql/")) ||
				path == "github.com/a-h/templ" || strings.HasPrefix(path, "github.com/a-h/templ/") {
				continue
			}
			t.Errorf("%s imports %q: a component renders what its handler passes it and reads nothing itself", name, path)
		}
	}
	if n == 0 {
		t.Fatal("no view source found")
	}
}

// TestOrderIDFieldsTakeText: a field that takes an order's public id (ord_…) must bring up
// a phone's keyboard, not its number pad: no inputmode="numeric" or "decimal", no
// type="number". Before, the key search's Order id and the refund's typed confirmation of
// the order's id did.
func TestOrderIDFieldsTakeText(t *testing.T) {
	files, err := filepath.Glob("*.templ")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range strings.SplitAfter(string(src), "<input")[1:] {
			tag = tag[:strings.Index(tag, ">")+1]
			if !strings.Contains(tag, `name="order"`) && !strings.Contains(tag, `name="confirm"`) {
				continue
			}
			n++
			for _, bad := range []string{`inputmode="numeric"`, `inputmode="decimal"`, `type="number"`} {
				if strings.Contains(tag, bad) {
					t.Errorf("%s: an order id field has %s: <input%s", name, bad, tag)
				}
			}
		}
	}
	if n < 4 {
		t.Fatalf("found %d order id fields; the test no longer finds them", n)
	}
}
