package apptest

import (
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/config"
)

// On is NewWith on a database the caller made and migrated at url, instead of a fresh test
// database: a private server started with settings of its own (synchronous replication to a
// standby that never comes, say).
func On(t testing.TB, url string, crash func(point string), change ...func(*config.Server)) *Env {
	t.Helper()
	cfg := Defaults(t)
	cfg.SandboxSlowDelay = 300 * time.Millisecond
	for _, c := range change {
		c(&cfg)
	}
	e := serve(t, cfg, url, &Clock{}, crash)
	e.Secret, e.ClientID = e.NewClient(t, "test app")
	return e
}
