package server

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// The shared plumbing decides nothing for the apps that import it: it links no console
// assets (before, `tekrar psp` carried the console's static files because this package
// served them) and does not flip gin's mode in an init for every importer.
func TestServerTakesNoAppDecisions(t *testing.T) {
	if want := os.Getenv(gin.EnvGinMode); gin.Mode() != gin.DebugMode && gin.Mode() != want {
		t.Errorf("importing the package set gin's mode to %s", gin.Mode())
	}
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
			if strings.HasSuffix(path, "/static") || strings.HasSuffix(path, "/admin") || strings.Contains(path, "/checkout") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
