package app

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout/report"
	"github.com/tekrar/tekrar/internal/config"
	"github.com/tekrar/tekrar/internal/db"
)

// openReader opens what the console's read-only pages read through: a pool of its own on
// cfg.ReadDatabaseURL (a standby, or with prefer-standby whichever node answers), bounded
// like the primary's by the stall timeout and holding a quarter of its connections (at least
// two), since only operators' pages use it; without a read URL, the primary's pool itself.
// close releases the pool it opened.
func openReader(cfg config.Server, primary *sqlx.DB) (_ report.Reader, close func(), err error) {
	if cfg.ReadDatabaseURL == "" {
		return report.PrimaryReader(primary), func() {}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pool, err := db.Open(ctx, cfg.ReadDatabaseURL, max(2, cfg.DBMaxConns/4), db.StallTimeout(cfg.DBTimeout))
	if err != nil {
		return report.Reader{}, nil, fmt.Errorf("read database (TEKRAR_READ_DATABASE_URL): %w", err)
	}
	return report.StandbyReader(pool), func() { _ = pool.Close() }, nil
}
