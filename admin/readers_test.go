package admin_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOnlyReadPagesUseTheReader: Deps.Read may be a standby, so only the pages of Register's
// reads group (GET pages that only read, each showing the standby's lag) may reach it. Every
// other handler and middleware Register mounts (every action and its form, the sign-in,
// sessions, CSRF, the pages kept on the primary) must not, through any function or method of
// this package it calls: a read made in order to write must see the primary. The reader
// itself cannot write (report.Reader has no Exec or Begin); this keeps it out of the write
// paths' reads too.
func TestOnlyReadPagesUseTheReader(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	methods := map[string]*ast.FuncDecl{} // of *console, by name
	funcs := map[string]*ast.FuncDecl{}   // plain functions, by name
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Recv == nil {
				funcs[fd.Name.Name] = fd
			} else if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok && ident(star.X) == "console" {
				methods[fd.Name.Name] = fd
			}
		}
	}
	register := funcs["Register"]
	if register == nil {
		t.Fatal("no Register")
	}

	// The console methods Register mounts, split by the group that mounts them.
	readRoots, otherRoots := map[string]bool{}, map[string]bool{}
	ast.Inspect(register.Body, func(n ast.Node) bool {
		var group string
		var args []ast.Expr
		switch x := n.(type) {
		case *ast.AssignStmt: // reads := authed.Group("", h(c.readFrom))
			if len(x.Lhs) == 1 && len(x.Rhs) == 1 {
				if call, ok := x.Rhs[0].(*ast.CallExpr); ok && selName(call.Fun) == "Group" {
					group, args = ident(x.Lhs[0]), call.Args
				}
			}
		case *ast.CallExpr: // reads.GET("/orders", h(c.orders))
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name != "Group" {
				group, args = ident(sel.X), x.Args
				if group == "reads" && sel.Sel.Name != "GET" {
					t.Errorf("%s: reads.%s: the reads group holds GET pages only", fset.Position(x.Pos()), sel.Sel.Name)
				}
			}
		}
		for _, arg := range args {
			ast.Inspect(arg, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && methods[sel.Sel.Name] != nil {
					if group == "reads" {
						readRoots[sel.Sel.Name] = true
					} else {
						otherRoots[sel.Sel.Name] = true
					}
				}
				return true
			})
		}
		return group == "" // arguments were walked above
	})
	otherRoots["handle"] = true // h, which every handler runs in

	// reaches reports the chain by which a root reaches the reader, or nil.
	reaches := func(root string) []string {
		type item struct {
			fd   *ast.FuncDecl
			path []string
		}
		seen := map[*ast.FuncDecl]bool{}
		queue := []item{{methods[root], []string{root}}}
		for len(queue) > 0 {
			it := queue[0]
			queue = queue[1:]
			if it.fd == nil || seen[it.fd] {
				continue
			}
			seen[it.fd] = true
			var found []string
			ast.Inspect(it.fd.Body, func(n ast.Node) bool {
				if found != nil {
					return false
				}
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if x.Sel.Name == "Read" && (ident(x.X) == recvName(it.fd) || selName(x.X) == "Deps") {
						found = append(slices.Clone(it.path), "Read at "+fset.Position(x.Pos()).String())
					}
					if fd := methods[x.Sel.Name]; fd != nil && ident(x.X) == recvName(it.fd) {
						queue = append(queue, item{fd, append(slices.Clone(it.path), x.Sel.Name)})
					}
				case *ast.Ident:
					if fd := funcs[x.Name]; fd != nil {
						queue = append(queue, item{fd, append(slices.Clone(it.path), x.Name)})
					}
				}
				return true
			})
			if found != nil {
				return found
			}
		}
		return nil
	}

	for root := range otherRoots {
		if readRoots[root] {
			continue // mounted as a page and as something else: checked as the page
		}
		if chain := reaches(root); chain != nil {
			t.Errorf("%s is not a page of the reads group but reaches the reader: %s", root, strings.Join(chain, " -> "))
		}
	}
	// Not vacuous: the actions are among the roots checked, and the pages do reach the reader.
	for _, action := range []string{"refund", "refundForm", "release", "releaseForm", "expire", "expireForm", "replay", "redeliver", "endSessions", "login", "requireSession", "checkCSRF"} {
		if !otherRoots[action] || readRoots[action] {
			t.Errorf("%s is not among the handlers checked to stay on the primary", action)
		}
	}
	for _, page := range []string{"orders", "order", "key", "keys", "overview", "settlements", "readFrom"} {
		if !readRoots[page] {
			t.Errorf("%s is not mounted on the reads group", page)
		} else if reaches(page) == nil {
			t.Errorf("the page %s does not read through Read", page)
		}
	}
}

func ident(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func selName(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		return sel.Sel.Name
	}
	return ""
}

func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List[0].Names) == 0 {
		return "\x00" // a plain function: no receiver to read the reader from
	}
	return fd.Recv.List[0].Names[0].Name
}
