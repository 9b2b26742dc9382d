// Package report reads what checkout recorded, for operators: the read model of the
// operator console (package admin renders it), the searches that answer "I was charged
// twice". Plain structs and functions over any sqlx.QueryerContext. It only reads; every
// write (a key, an order, a refund, an operator's action) is package checkout's, and
// checkout imports nothing of this package.
//
// Every list is keyset-paginated (a page costs the same however deep it is) and every value
// reaches Postgres as a parameter. The SQL of a search is assembled from the constant
// fragments next to it with only the predicates its filter uses, so that each combination
// gets a plan made for it instead of one generic plan full of "$n IS NULL OR ..." branches.
// The number of distinct texts is small and bounded, but they are not hot-path statements:
// pass the pool, not a db.Prepared.
//
// The indexes these queries rely on are in migrations 00004 and 00005; plan_test.go checks
// at 200,000 keys that no plan scans idempotency_keys, orders or key_events whole.
//
// Two patterns recur, both to avoid an index on idempotency_keys (the checkout hot path):
//   - "newest first over all clients" reads each client's own (client_id, created_at)
//     index with a LATERAL subquery and merges the per-client pages: clients are few (apps
//     and POS fleets), so this costs a few index descents per client instead of a global
//     created_at index;
//   - an exact search without a client ("key k", "customer c") names the clients as
//     client_id = ANY (ARRAY(SELECT id FROM clients)), which lets the (client_id, ...)
//     indexes be probed once per client.
package report

// This file holds what the searches share: the assembly of SQL text and arguments and
// ErrInvalidQuery; cursor.go holds Page and its keyset cursor. The searches live by what
// they list: keys.go, keydetail.go, events.go, overview.go, orders.go and orderdetail.go.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Page sizes of the console's lists.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
	// MaxTimelineEvents bounds KeyTimeline; a key with more events (a client replaying it in
	// a loop) shows its oldest ones, and ListHistory with HistoryFilter.Key pages through all.
	MaxTimelineEvents = 1000
	// MaxRateBuckets bounds ReplayRate.
	MaxRateBuckets = 1000
)

// ErrInvalidQuery wraps every refusal of a console query's input (an unknown state or
// kind, a malformed cursor, an empty time range): the console answers it with a 400.
var ErrInvalidQuery = errors.New("invalid console query")

func invalidQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
}

// sqlArgs collects query parameters; p adds one and returns its placeholder.
type sqlArgs []any

func (a *sqlArgs) p(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// t adds a time bound. Postgres keeps microseconds and rounds finer times to the nearest
// one; rounding bounds up instead keeps "at >= from" and "at < to" exact for them.
func (a *sqlArgs) t(v time.Time) string { return a.p(ceilMicro(v)) }

func ceilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

func sqlWhere(preds []string) string {
	if len(preds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(preds, " AND ")
}

// allClients stands for "any client" where an index leads with client_id (see the top).
const allClients = `ANY (ARRAY(SELECT id FROM clients))`
