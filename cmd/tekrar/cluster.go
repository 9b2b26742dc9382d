package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekrar/tekrar/internal/cluster"
	"github.com/tekrar/tekrar/internal/config"
)

// clusterCmd: `tekrar cluster` runs on this machine what docs/ha.md describes for three: three
// Postgres nodes under Patroni with one etcd, synchronous replication that cannot fall back
// to asynchronous, for trying tekrar's failover. It prints the DATABASE_URL that finds the
// primary after a failover, and stops everything on Ctrl-C.
func clusterCmd(e env) *cobra.Command {
	var dir string
	return command(e, "cluster", "run a local three-node Postgres cluster under Patroni (for trying failover)", exactArgs(0),
		func(s *config.Set) { config.BindClusterDir(s, &dir) },
		func(ctx context.Context, _ []string) error { return runCluster(ctx, e, dir) })
}

func runCluster(ctx context.Context, e env, dir string) (err error) {
	if err := cluster.Available(); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "starting three Postgres nodes under Patroni in %s ...\n", dir)
	started := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(e.stderr, "stopping the cluster ...")
		if serr := c.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop cluster: %w", serr)
		}
	}()
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	fmt.Fprint(e.stdout, clusterBanner(c, leader, time.Since(started)))
	<-ctx.Done()
	return nil
}

// clusterBanner is what `tekrar cluster` prints once the cluster takes writes.
func clusterBanner(c *cluster.Cluster, leader int, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\ntekrar cluster is running (%d nodes, ready in %v) in %s\n", c.Nodes(), took.Round(100*time.Millisecond), c.Dir())
	fmt.Fprintf(&b, "  serve on it:  DATABASE_URL='%s' tekrar serve\n", c.URL(cluster.Database))
	b.WriteString("  nodes:\n")
	for i := range c.Nodes() {
		role := "replica"
		if i == leader {
			role = "leader"
		}
		fmt.Fprintf(&b, "    %s  %-7s  psql '%s'  Patroni %s/patroni\n", c.Name(i), role, c.SuperuserURL(i, cluster.Database), c.RESTURL(i))
	}
	fmt.Fprintf(&b, "  etcd:  %s\n", c.EtcdURL())
	fmt.Fprintf(&b, "  see the cluster:  patronictl -c %s/node0/patroni.yml list\n", c.Dir())
	b.WriteString("Ctrl-C stops the cluster; its data is kept for the next run.\n\n")
	return b.String()
}
