package pglocal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
)

// StartStandby starts a streaming standby of primary, a running server of this package: its
// cluster is not made by initdb but copied from primary by pg_basebackup -R, which writes
// standby.signal and a primary_conninfo naming primary's socket, so the standby streams from
// primary as soon as it starts. opts are Start's: an empty Dir makes an ephemeral standby,
// removed on Stop like any test server; a Dir that already holds a cluster is started as it
// is. Tests use it to read a standby and to watch replication lag.
func StartStandby(ctx context.Context, primary *Server, opts Options) (*Server, error) {
	if primary == nil {
		return nil, fmt.Errorf("start standby: no primary")
	}
	opts.standbyOf = primary
	return Start(ctx, opts)
}

// makeCluster creates the data directory: initdb, or for a standby a base backup of its
// primary.
func (s *Server) makeCluster(ctx context.Context, primary *Server) error {
	if primary == nil {
		return s.initdb(ctx)
	}
	args := []string{"-D", s.data, "-R", "-X", "stream", "-c", "fast",
		"-h", primary.Dir(), "-p", strconv.Itoa(primary.socketPort()), "-U", "postgres"}
	if s.ephemeral {
		args = append(args, "--no-sync") // the data dies with the server anyway
	}
	cmd := s.command(ctx, "pg_basebackup", args...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, s.logw)
	cmd.Stderr = cmd.Stdout
	if err := StartChild(cmd); err != nil {
		return fmt.Errorf("pg_basebackup: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("pg_basebackup: %w: %s", err, lastLines(out.String(), 5))
	}
	return nil
}
