package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func versionCmd(e env) *cobra.Command {
	return command(e, "version", "print the module version and the VCS revision it was built from", exactArgs(0), nil,
		func(_ context.Context, _ []string) error {
			fmt.Fprintln(e.stdout, versionLine())
			return nil
		})
}

// versionLine is what the Go toolchain stamped into the binary: the module path and version
// ("(devel)" when built from a checkout) and, when it built from a VCS checkout, the
// revision, its time and whether the tree had uncommitted changes. `go run` and `go test`
// builds carry no VCS information; the line then says so rather than guessing.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "tekrar (no build information)"
	}
	parts := []string{"tekrar", bi.Main.Path, orUnknown(bi.Main.Version)}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; rev != "" {
		r := vcs["vcs"] + " " + rev
		if t := vcs["vcs.time"]; t != "" {
			r += " " + t
		}
		if vcs["vcs.modified"] == "true" {
			r += " (modified)"
		}
		parts = append(parts, r)
	} else {
		parts = append(parts, "(no VCS revision: built by go run or without -buildvcs)")
	}
	return strings.Join(append(parts, bi.GoVersion), " ")
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown version)"
	}
	return s
}
