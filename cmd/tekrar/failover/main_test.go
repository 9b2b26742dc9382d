// Package failover holds the failover harness, TestFailover: the tekrar binary on a
// three-node Patroni cluster (internal/cluster) while the leader is killed, frozen and
// switched over, its history checked by internal/ledgercheck. It is a package of its own, with only tests, so that go
// test runs its test binary beside cmd/tekrar's instead of after it.
package failover

import (
	"os"
	"testing"

	"github.com/tekrar/tekrar/internal/proctest"
)

func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
