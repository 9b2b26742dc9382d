// Package docs holds no code, only this test of the Go in the documentation. A snippet no
// compiler reads drifts: docs/clients.md's read p.OrderID before anything had filled p, and
// panicked on the first declined card, while the package's own example, compiled and run,
// had it right. So every ```go block of docs/*.md and README.md names, on the line before
// it, the Go file of this module it is taken from (<!-- go: path/to/file.go -->), and must
// appear there, line for line: that file compiles with the module and is run by its
// package's tests. Blocks in other languages (the Kotlin and Swift loops of clients.md)
// are not checked.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// marker names the Go file a block is taken from.
var marker = regexp.MustCompile(`^<!-- go: ([^ ]+\.go) -->$`)

type snippet struct {
	doc   string // the markdown file
	line  int    // of the opening fence, 1-based
	from  string // the marker's path; "" when there is none
	lines []string
}

// snippets returns the ```go blocks of one markdown file.
func snippets(t *testing.T, path string) []snippet {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []snippet
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		s := snippet{doc: path, line: i + 1}
		if i > 0 {
			if m := marker.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				s.from = m[1]
			}
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			s.lines = append(s.lines, strings.TrimRight(lines[i], " \t"))
		}
		out = append(out, s)
	}
	return out
}

// within reports whether block appears in file as consecutive lines, all indented alike
// (a block taken from a function's body is one tab in there).
func within(block, file []string) bool {
	if len(block) == 0 {
		return false
	}
	for i := range file {
		first := strings.TrimRight(file[i], " \t")
		if !strings.HasSuffix(first, block[0]) {
			continue
		}
		indent := first[:len(first)-len(block[0])]
		if strings.Trim(indent, "\t") != "" || i+len(block) > len(file) {
			continue
		}
		ok := true
		for j, l := range block {
			got := strings.TrimRight(file[i+j], " \t")
			if l == "" && got == "" {
				continue
			}
			if got != indent+l {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func TestGoBlocksAreCompiledCode(t *testing.T) {
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../README.md")
	n := 0
	for _, doc := range docs {
		for _, s := range snippets(t, doc) {
			n++
			where := s.doc + ":" + strconv.Itoa(s.line)
			if s.from == "" {
				t.Errorf("%s: a ```go block without <!-- go: path/to/file.go --> on the line before it, naming the module's file it is taken from", where)
				continue
			}
			b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(s.from)))
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if !within(s.lines, strings.Split(string(b), "\n")) {
				t.Errorf("%s: the block is not in %s, line for line: copy it from there again\n%s", where, s.from, strings.Join(s.lines, "\n"))
			}
		}
	}
	if n == 0 {
		t.Fatal("no ```go block found: has the documentation moved?")
	}
}
