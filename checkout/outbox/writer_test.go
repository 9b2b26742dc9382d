package outbox_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// moduleRoot is where go.mod is, from this package's directory.
const moduleRoot = "../.."

// eventInsert is how a statement inserts events, however it is spaced.
var eventInsert = regexp.MustCompile(`INSERT\s+INTO\s+outbox_events\b`)

// TestOneStatementInsertsEvents reads the module's Go (tests aside): InsertSQL is the only
// statement that inserts into outbox_events, and no event type is written as an SQL literal
// outside this package, so that every event is written one way, with the types of Types.
// Migrations are left out: they define the types' domain, and are history.
func TestOneStatementInsertsEvents(t *testing.T) {
	t.Parallel()
	var literals []string
	for _, typ := range outbox.Types {
		literals = append(literals, "'"+typ+"'")
	}
	var inserts []string
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		if d.IsDir() {
			if rel == "migrations" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range eventInsert.FindAllIndex(src, -1) {
			inserts = append(inserts, rel+":"+line(src, m[0]))
		}
		if filepath.Dir(rel) == filepath.Join("checkout", "outbox") {
			return nil
		}
		for _, lit := range literals {
			for i := 0; ; {
				j := bytes.Index(src[i:], []byte(lit))
				if j < 0 {
					break
				}
				t.Errorf("%s:%s: the event type %s written in SQL: use outbox.TypeSQL", rel, line(src, i+j), lit)
				i += j + len(lit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(inserts) != 1 || !strings.HasPrefix(inserts[0], filepath.Join("checkout", "outbox")+string(filepath.Separator)) {
		t.Errorf("statements that insert events: %v; want only outbox.InsertSQL (splice it as a CTE)", inserts)
	}
}

// line is the 1-based line of src's byte offset i, as text.
func line(src []byte, i int) string {
	return strconv.Itoa(bytes.Count(src[:i], []byte("\n")) + 1)
}
