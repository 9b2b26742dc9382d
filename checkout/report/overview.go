package report

// The console's overview: keys needing attention, event counts, the replay rate and the
// sweeper's recent passes. See report.go for the conventions (parameters only,
// index-backed, no whole scans).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
)

// NeedsAttention counts the keys an operator has to resolve.
func NeedsAttention(ctx context.Context, db sqlx.QueryerContext) (int64, error) {
	var n int64
	// Keys without a response, so that the partial idempotency_keys_unanswered_idx answers it.
	err := sqlx.GetContext(ctx, db, &n, `
		SELECT count(*) FROM idempotency_keys WHERE state = 'needs_attention' AND response_status IS NULL`)
	if err != nil {
		return 0, fmt.Errorf("count keys needing attention: %w", err)
	}
	return n, nil
}

// CountRequests is the key of HistoryCounts' total of keyed requests: every event a request
// leaves (created, replayed, reused_conflict, in_use_rejected, resumed, late_retry), not
// the completed events that follow a created or resumed one, nor the sweeper's expired.
const CountRequests = "requests"

// requestKinds are the kinds of event that a keyed request leaves, one per request.
var requestKinds = []string{checkout.KindCreated, checkout.KindReplayed, checkout.KindReusedConflict, checkout.KindInUseRejected,
	checkout.KindResumed, checkout.KindLateRetry}

// wholeMinutes returns the whole minutes [m1, m2) inside [from, to), which
// key_event_counts answers; the ragged edges [from, m1) and [m2, to) are read from
// key_events, a minute's worth at most each. With no whole minute inside, m1 = m2 = to and
// the first edge is the whole window.
func wholeMinutes(from, to time.Time) (m1, m2 time.Time) {
	m1 = from.Truncate(time.Minute)
	if m1.Before(from) {
		m1 = m1.Add(time.Minute)
	}
	m2 = to.Truncate(time.Minute)
	if !m1.Before(m2) {
		return to, to
	}
	return m1, m2
}

// eventCountsSQL counts by kind: the whole minutes from key_event_counts (kept by triggers
// on key_events, see migrations/00008_event_counts.sql), the edges from key_events through
// (kind, at) over all clients or (client_id, kind, at) for one, index-only.
func eventCountsSQL(from, to time.Time, clientID int64) (string, []any, error) {
	if !to.After(from) {
		return "", nil, invalidQuery("empty time range")
	}
	m1, m2 := wholeMinutes(from, to)
	var a sqlArgs
	kinds := a.p(pq.Array(EventKinds))
	client := func(alias string) string {
		if clientID == 0 {
			return ""
		}
		return " AND " + alias + ".client_id = " + a.p(clientID)
	}
	edge := func(lo, hi string) string {
		return `
		    SELECT e.kind, count(*) AS n FROM key_events e
		     WHERE e.kind = ANY (` + kinds + `::text[]) AND e.at >= ` + lo + ` AND e.at < ` + hi + client("e") + `
		     GROUP BY e.kind`
	}
	f, lo, hi, t := a.t(from), a.t(m1), a.t(m2), a.t(to)
	return `
		SELECT x.kind, sum(x.n)::bigint AS n FROM (
		    SELECT c.kind, c.n FROM key_event_counts c
		     WHERE c.minute >= ` + lo + ` AND c.minute < ` + hi + ` AND c.kind = ANY (` + kinds + `::text[])` + client("c") + `
		    UNION ALL` + edge(f, lo) + `
		    UNION ALL` + edge(hi, t) + `
		) x GROUP BY x.kind`, a, nil
}

// HistoryCounts counts the history entries of each kind in [from, to), of one client or (clientID 0)
// of all: the console's overview. Every kind is in the map, with 0 if none happened, and
// CountRequests holds the number of keyed requests.
func HistoryCounts(ctx context.Context, db sqlx.QueryerContext, from, to time.Time, clientID int64) (map[string]int64, error) {
	q, a, err := eventCountsSQL(from, to, clientID)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		Kind string `db:"kind"`
		N    int64  `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, fmt.Errorf("count events: %w", err)
	}
	m := make(map[string]int64, len(EventKinds)+1)
	for _, k := range EventKinds {
		m[k] = 0
	}
	m[CountRequests] = 0
	for _, r := range rows {
		m[r.Kind] = r.N
		if slices.Contains(requestKinds, r.Kind) {
			m[CountRequests] += r.N
		}
	}
	return m, nil
}

// RateBucket is one bar of the replay chart: the keys first executed and the repeats
// answered from storage in [Start, End).
type RateBucket struct {
	Start, End time.Time
	Created    int64
	Replayed   int64
}

func replayRateSQL(from, to time.Time, buckets int) (string, []any, time.Duration, error) {
	if !to.After(from) {
		return "", nil, 0, invalidQuery("empty time range")
	}
	if buckets < 1 || buckets > MaxRateBuckets {
		return "", nil, 0, invalidQuery("buckets must be between 1 and %d", MaxRateBuckets)
	}
	// Whole microseconds, Postgres' precision, rounded up so that the buckets cover [from, to).
	// date_part is a double, unlike extract's numeric which costs twice as much per event,
	// and exact here: the offset is a whole number of microseconds well within 2^53, and
	// the cast to bigint rounds to it.
	us := max((to.Sub(from).Microseconds()+int64(buckets)-1)/int64(buckets), 1)
	width := time.Duration(us) * time.Microsecond
	bucket := func(col string) string {
		return `(date_part('epoch', ` + col + ` - $1::timestamptz) * 1000000)::bigint / $3::bigint`
	}
	events := func(lo, hi string) string {
		return `
		    SELECT ` + bucket("e.at") + ` AS b,
		           count(*) FILTER (WHERE e.kind = 'created') AS created,
		           count(*) FILTER (WHERE e.kind = 'replayed') AS replayed
		      FROM key_events e
		     WHERE e.kind IN ('created', 'replayed') AND e.at >= ` + lo + ` AND e.at < ` + hi + `
		     GROUP BY 1`
	}
	// When the buckets start on a minute and are whole minutes wide, every minute of
	// key_event_counts falls in one bucket: whole minutes come from there, and only the
	// last, unfinished minute from the events. Otherwise every event is read.
	m1, m2 := wholeMinutes(from, to)
	if !m1.Equal(from) || width%time.Minute != 0 {
		return `SELECT b, coalesce(sum(created), 0)::bigint AS created, coalesce(sum(replayed), 0)::bigint AS replayed FROM (` +
			events("$1", "$2") + `) x GROUP BY b`, []any{from, to, width.Microseconds()}, width, nil
	}
	return `
		SELECT b, coalesce(sum(created), 0)::bigint AS created, coalesce(sum(replayed), 0)::bigint AS replayed FROM (
		    SELECT ` + bucket("c.minute") + ` AS b,
		           sum(c.n) FILTER (WHERE c.kind = 'created') AS created,
		           sum(c.n) FILTER (WHERE c.kind = 'replayed') AS replayed
		      FROM key_event_counts c
		     WHERE c.kind IN ('created', 'replayed') AND c.minute >= $1 AND c.minute < $4
		     GROUP BY 1
		    UNION ALL` + events("$4", "$2") + `
		) x GROUP BY b`, []any{from, to, width.Microseconds(), m2}, width, nil
}

// ReplayRate splits [from, to) into buckets of equal width (the last one may be cut short
// by to) and counts created and replayed events in each, over all clients.
func ReplayRate(ctx context.Context, db sqlx.QueryerContext, from, to time.Time, buckets int) ([]RateBucket, error) {
	from, to = ceilMicro(from), ceilMicro(to)
	q, a, width, err := replayRateSQL(from, to, buckets)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		B        int64 `db:"b"`
		Created  int64 `db:"created"`
		Replayed int64 `db:"replayed"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, q, a...); err != nil {
		return nil, fmt.Errorf("replay rate: %w", err)
	}
	out := make([]RateBucket, buckets)
	for i := range out {
		out[i].Start = minTime(from.Add(time.Duration(i)*width), to).UTC()
		out[i].End = minTime(from.Add(time.Duration(i+1)*width), to).UTC()
	}
	for _, r := range rows {
		b := min(max(r.B, 0), int64(buckets-1))
		out[b].Created += r.Created
		out[b].Replayed += r.Replayed
	}
	return out, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// SweepRow is one pass of the sweeper.
type SweepRow struct {
	ID                  int64     `db:"id"`
	StartedAt           time.Time `db:"started_at"`
	FinishedAt          time.Time `db:"finished_at"`
	Node                string    `db:"node"`
	KeysTombstoned      int64     `db:"keys_tombstoned"`
	KeysDeleted         int64     `db:"keys_deleted"`
	TombstonesForgotten int64     `db:"tombstones_forgotten"`
	EventsDeleted       int64     `db:"events_deleted"`
	Batches             int       `db:"batches"`
	Error               string    `db:"error"` // empty: the pass succeeded
}

const recentSweepsSQL = `
	SELECT id, started_at, finished_at, node, keys_tombstoned, keys_deleted, tombstones_forgotten,
	       events_deleted, batches, coalesce(error, '') AS error
	  FROM sweeps
	 ORDER BY id DESC
	 LIMIT $1`

// RecentSweeps returns the last limit sweeper passes (at most MaxPageLimit), newest first.
func RecentSweeps(ctx context.Context, db sqlx.QueryerContext, limit int) ([]SweepRow, error) {
	var rows []SweepRow
	if err := sqlx.SelectContext(ctx, db, &rows, recentSweepsSQL, Page{Limit: limit}.size()); err != nil {
		return nil, fmt.Errorf("recent sweeps: %w", err)
	}
	for i := range rows {
		rows[i].StartedAt, rows[i].FinishedAt = rows[i].StartedAt.UTC(), rows[i].FinishedAt.UTC()
	}
	return rows, nil
}
