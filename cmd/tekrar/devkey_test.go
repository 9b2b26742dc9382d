package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tekrar/tekrar/checkout/deliveries"
)

// dev makes its secrets key once and keeps it: the second start reads the same key (the
// endpoints' secrets sealed under it keep opening), from a file only its owner can read.
func TestDevSecretsKeyIsMadeOnceAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	first, err := devSecretsKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := deliveries.NewSealer(first); err != nil || s == nil {
		t.Fatalf("the dev key does not make a sealer: %v", err)
	}
	again, err := devSecretsKey(dir)
	if err != nil || again != first {
		t.Fatalf("second start: %q %v, want the first key", again, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "secrets.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
}
