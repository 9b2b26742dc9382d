package pglocal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBinDirWrongPGBINDIR(t *testing.T) {
	t.Setenv("PG_BINDIR", t.TempDir())
	t.Setenv("PATH", "")
	_, err := FindBinDir()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("FindBinDir() = %v, want an error wrapping ErrNotInstalled", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans several lines: %q", err)
	}
	if !strings.Contains(err.Error(), "PG_BINDIR") {
		t.Errorf("error does not name PG_BINDIR: %q", err)
	}
}

func TestFindBinDirNothingInstalled(t *testing.T) {
	t.Setenv("PATH", "")
	_, err := findBinDir("", t.TempDir())
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("findBinDir() = %v, want an error wrapping ErrNotInstalled", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
	for _, want := range []string{"apt-get install postgresql", "PG_BINDIR", "DATABASE_URL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
}

func TestFindBinDirPicksNewestVersion(t *testing.T) {
	t.Setenv("PATH", "")
	root := t.TempDir()
	for _, v := range []string{"9.6", "10", "15", "notaversion"} {
		fakeServer(t, filepath.Join(root, v, "bin"))
	}
	if err := os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755); err != nil { // no binaries
		t.Fatal(err)
	}
	got, err := findBinDir("", root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin"); got != want {
		t.Errorf("findBinDir() = %s, want %s", got, want)
	}
}

func TestFindBinDirHonoursPGBINDIR(t *testing.T) {
	dir := t.TempDir()
	fakeServer(t, dir)
	t.Setenv("PG_BINDIR", dir)
	got, err := FindBinDir()
	if err != nil || got != dir {
		t.Errorf("FindBinDir() = %q, %v; want %q", got, err, dir)
	}
}

func fakeServer(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
