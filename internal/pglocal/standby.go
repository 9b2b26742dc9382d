package pglocal

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
)

// basebackup fills s's data directory with a copy of primary's cluster (pg_basebackup -R),
// which writes standby.signal and primary_conninfo there: the server then starts as a
// streaming standby of primary (Options.StandbyOf).
func (s *Server) basebackup(ctx context.Context, primary *Server) error {
	cmd := s.command(ctx, "pg_basebackup", "-D", s.data, "-R", "-X", "stream", "-c", "fast",
		"-h", primary.Dir(), "-p", strconv.Itoa(primary.socketPort()), "-U", "postgres")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := StartChild(cmd); err != nil {
		return fmt.Errorf("pg_basebackup: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("pg_basebackup: %w: %s", err, lastLines(out.String(), 5))
	}
	return nil
}
