package report

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/jmoiron/sqlx"
)

// Reader is the handle the console's read-only pages read through: the primary's pool, or,
// when TEKRAR_READ_DATABASE_URL is set, a pool that may land on a standby. It can query and
// nothing else (no Exec, no Begin, no Prepare), so a write through it does not compile, and
// a page that reads in order to write (an action's form, the action itself) has no choice but
// the primary's *sqlx.DB. Every search of this package takes it as a sqlx.QueryerContext.
//
// Only admin's read-only pages and the reports may hold one; the engine, the operator's
// actions, the sign-in and sessions never do (docs/architecture.md, "Reads on a standby").
type Reader struct {
	db *sqlx.DB
	// separate: the pool is the read URL's, which may reach a standby, so Lag asks it; a
	// reader of the primary's own pool has no lag to show.
	separate bool
}

// PrimaryReader reads the primary's pool: what the console does when no read URL is set.
func PrimaryReader(db *sqlx.DB) Reader { return Reader{db: db} }

// StandbyReader reads a pool opened on the read URL: a standby, or with
// target_session_attrs=prefer-standby whichever node answers, the primary when no standby
// does (Lag then says it is the primary).
func StandbyReader(db *sqlx.DB) Reader { return Reader{db: db, separate: true} }

// QueryContext runs a query (sqlx.QueryerContext).
func (r Reader) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.db.QueryContext(ctx, query, args...)
}

// QueryxContext runs a query (sqlx.QueryerContext).
func (r Reader) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return r.db.QueryxContext(ctx, query, args...)
}

// QueryRowxContext runs a query for one row (sqlx.QueryerContext).
func (r Reader) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	return r.db.QueryRowxContext(ctx, query, args...)
}

// Lag is how far behind the primary a page's reads may be, measured on the node the reader
// reaches.
type Lag struct {
	// Standby: the node is a standby. False for the primary's own pool, and for a read URL
	// that reached the primary (prefer-standby with no standby up): nothing to show then.
	Standby bool
	// Behind is the standby's now() less the commit time of the last transaction it
	// replayed; Known is false when it has replayed none since it started. When the primary
	// is idle it grows although nothing is missing, so it counts only when !CaughtUp.
	Behind time.Duration
	Known  bool
	// CaughtUp: the standby has replayed all the WAL it received, and it is receiving.
	CaughtUp bool
	// Receiving: a WAL receiver runs, streaming from the primary. Without one (the primary
	// is gone, or unreachable) what was received says nothing of what the primary has since.
	Receiving bool
}

// lagSQL is measured on the node the reader reaches. pg_last_xact_replay_timestamp() stays
// at the last replayed commit while the primary is idle, so the replay timestamp alone would
// show an idle standby falling behind: comparing the WAL received with the WAL replayed says
// whether anything received is still unreplayed. pg_stat_wal_receiver shows its row (its pid)
// to any user while a receiver runs.
const lagSQL = `SELECT pg_is_in_recovery(),
       EXTRACT(epoch FROM now() - pg_last_xact_replay_timestamp())::float8,
       pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn(),
       EXISTS (SELECT FROM pg_stat_wal_receiver)`

// Lag measures the lag of the node this reader reaches; a reader of the primary's pool
// answers the zero Lag without asking.
func (r Reader) Lag(ctx context.Context) (Lag, error) {
	if !r.separate {
		return Lag{}, nil
	}
	var l Lag
	var behind sql.NullFloat64
	var replayed bool
	if err := r.db.QueryRowContext(ctx, lagSQL).Scan(&l.Standby, &behind, &replayed, &l.Receiving); err != nil {
		return Lag{}, fmt.Errorf("standby lag: %w", err)
	}
	if !l.Standby {
		return Lag{}, nil
	}
	l.Known = behind.Valid
	l.Behind = time.Duration(math.Max(behind.Float64, 0) * float64(time.Second))
	l.CaughtUp = replayed && l.Receiving
	return l, nil
}

// String is the line a page shows under its header: "" for the primary, "read from a
// standby, up to date", "read from a standby, 12 s behind" (whole seconds, rounded up, so
// never "0 s" while something is missing).
func (l Lag) String() string {
	secs := int64(math.Ceil(l.Behind.Seconds()))
	switch {
	case !l.Standby:
		return ""
	case l.CaughtUp:
		return "read from a standby, up to date"
	case !l.Receiving && l.Known:
		return fmt.Sprintf("read from a standby that is not receiving from the primary; its last replayed change is %d s old", secs)
	case !l.Receiving:
		return "read from a standby that is not receiving from the primary"
	case !l.Known:
		return "read from a standby, behind the primary by an unknown time"
	}
	return fmt.Sprintf("read from a standby, %d s behind", max(secs, 1))
}
